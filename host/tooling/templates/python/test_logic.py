import unittest

from logic import keys_label


class KeysLabelTest(unittest.TestCase):
    def test_the_label_is_the_number_of_data_keys(self):
        self.assertEqual(keys_label({}), "0")
        self.assertEqual(keys_label({"data": {"a": "1"}}), "1")


if __name__ == "__main__":
    unittest.main()
