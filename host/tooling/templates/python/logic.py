"""The plugin's own logic, apart from the host's bindings so plain Python can test it."""


def keys_label(config_map: dict) -> str:
    """The label value for a ConfigMap: how many keys its data has."""
    return str(len(config_map.get("data") or {}))
