//! The registry: an external record of every WebApp, kept while it lives and removed
//! before it goes. A ConfigMap per WebApp in the namespace the operator names
//! (`registryNamespace` in the plugin's settings) stands in for a record outside the
//! cluster (a DNS entry, a row in a service catalogue): Kubernetes' garbage collector
//! cannot remove it, so a finalizer on the WebApp holds the WebApp until this
//! controller has deleted the record.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use wasm_controller_sdk::cluster::{self, Propagation};
use wasm_controller_sdk::{Error, Gvk, ObjectRef};

use crate::webapp::WebApp;

/// The finalizer that holds a WebApp until its record is deleted.
pub const FINALIZER: &str = "demo.wasm-controller-manager.io/registry";

/// The plugin's settings, from the operator (`deployment-reconcile.settings.yaml`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// The name this copy registers under (read by `config::name_or`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where records are kept; none: no records, no finalizer.
    #[serde(default)]
    pub registry_namespace: Option<String>,
    /// How often a WebApp with a Secret is looked at again (the Secret is read live,
    /// not watched, so a rotation is noticed within this); 60 s if not set.
    #[serde(default)]
    pub secret_recheck_seconds: Option<u64>,
}

impl Settings {
    /// The period of [`Settings::secret_recheck_seconds`], at least one second.
    pub fn secret_recheck(&self) -> Duration {
        Duration::from_secs(self.secret_recheck_seconds.unwrap_or(60).max(1))
    }
}

/// The record's name: the WebApp's namespace and name, which together are unique.
pub fn record_name(app: &WebApp) -> String {
    let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
    let name = app.metadata.name.as_deref().unwrap_or_default();
    format!("{namespace}.{name}")
}

/// The record of `app` in `registry`: where it is served and what it runs.
pub fn record(app: &WebApp, registry: &str) -> Value {
    let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
    let name = app.metadata.name.as_deref().unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": record_name(app), "namespace": registry},
        "data": {
            "webapp": format!("{namespace}/{name}"),
            "image": app.spec.image,
            "url": format!("http://{name}.{namespace}:{}", app.spec.port),
        },
    })
}

/// Writes (server-side applies) the record of `app`.
pub fn keep(app: &WebApp, registry: &str) -> Result<(), Error> {
    cluster::apply_json(&record(app, registry), true).map(|_| ())
}

/// Deletes the record of `app`; one already gone is fine.
pub fn forget(app: &WebApp, registry: &str) -> Result<(), Error> {
    let record = ObjectRef {
        kind: Gvk::new("", "v1", "ConfigMap"),
        namespace: Some(registry.to_string()),
        name: record_name(app),
    };
    match cluster::delete(&record, Propagation::Background) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> WebApp {
        serde_json::from_value(json!({
            "metadata": {"name": "shop", "namespace": "demo"},
            "spec": {"image": "nginx:1.27", "port": 80},
        }))
        .expect("decodes")
    }

    #[test]
    fn the_record_names_the_webapp_and_where_it_is_served() {
        let record = record(&app(), "registry");
        assert_eq!(record["metadata"]["name"], "demo.shop");
        assert_eq!(record["metadata"]["namespace"], "registry");
        assert_eq!(record["data"]["webapp"], "demo/shop");
        assert_eq!(record["data"]["url"], "http://shop.demo:80");
    }

    #[test]
    fn settings_are_optional_and_unknown_keys_are_refused() {
        let none: Settings = serde_json::from_str("{}").expect("empty");
        assert_eq!(none.registry_namespace, None);
        assert_eq!(none.secret_recheck(), Duration::from_secs(60));
        let fast: Settings = serde_json::from_str(r#"{"secretRecheckSeconds": 0}"#).expect("0");
        assert_eq!(fast.secret_recheck(), Duration::from_secs(1));
        let bad = serde_json::from_str::<Settings>(r#"{"registry": "x"}"#);
        assert!(bad.is_err(), "a misspelt key is an error, not ignored");
    }
}
