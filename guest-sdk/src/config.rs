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
/// `default`. The host runs every plugin under its file's name (`a.wasm` runs as `a`),
/// whatever it registers as, and only shows a different registered name; this lets a
/// copy's registered name match its file's when the operator names both.
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
