// The plugin's own logic, apart from the host's imports so plain Node can test it.

/** The label value for a ConfigMap: how many keys its data has. */
export function keysLabel(configMap) {
  return String(Object.keys(configMap.data || {}).length);
}
