//! The plugin's settings from the cluster's operator (`<plugin>.settings.json` or
//! `.settings.yaml` beside the plugin file, as JSON), readable in `registration` and
//! in `reconcile`; a change of the file loads the plugin again with the new ones.

use serde::de::DeserializeOwned;

use crate::Error;
use crate::wit::wcm::controller::config as host;

/// The settings as JSON text, or `None` when the plugin has none.
pub fn settings_json() -> Option<String> {
    host::settings()
}

/// The settings as `T` (a `#[derive(Deserialize)]` struct, say), or `None` when the
/// plugin has none; `invalid` naming the problem if they do not fit `T`.
pub fn settings<T: DeserializeOwned>() -> Result<Option<T>, Error> {
    let Some(json) = settings_json() else {
        return Ok(None);
    };
    serde_json::from_str(&json)
        .map(Some)
        .map_err(|e| Error::invalid(format!("the plugin's settings: {e}")))
}

/// The name to register under: the settings' `name` if the operator set one, else
/// `default`. It lets one component run more than once in a host, each copy under its
/// own name with its own settings file (`a.wasm` + `a.settings.yaml`, `b.wasm` +
/// `b.settings.yaml`); the host refuses two files registering the same name.
pub fn name_or(default: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Named {
        name: Option<String>,
    }
    let named = settings::<Named>().ok().flatten();
    named
        .and_then(|n| n.name)
        .unwrap_or_else(|| default.to_string())
}
