"""The plugin itself, run by `wasm-controller-manager test` on the objects in
testdata/: what it does must be what testdata/expected.yaml says, and it must end in
the same state whatever fault strikes (a crash right after a write, a stale cache, a
late watch event, an API error or timeout). Build {{name}}.wasm first (`make test`
does); the host binary is $WCM, else wasm-controller-manager on PATH. Runs under
unittest and pytest alike."""

import os
import subprocess
import unittest


class PluginTest(unittest.TestCase):
    def test_the_plugin_does_what_testdata_expects_whatever_fault_strikes(self):
        wcm = os.environ.get("WCM", "wasm-controller-manager")
        run = subprocess.run(
            [wcm, "test", "{{name}}.wasm", "testdata/cluster.yaml",
             "--expect", "testdata/expected.yaml", "--faults", "all"],
            capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main()
