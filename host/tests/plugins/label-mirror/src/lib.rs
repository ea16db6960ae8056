//! Test plugin: for every Pod and ConfigMap carrying the label `wcm.test/source`, sets
//! the label `wcm.test/mirrored` to the same value. Its end state is checkable object
//! by object, so tests can tell a lost or stale update from a correct one under churn,
//! across host restarts and across watch expiry. Settings `{"mirrored-label": KEY}`
//! write the copy to KEY instead, so copies of the plugin under other names each
//! leave a mark of their own; `{"also-kind": {"group", "version", "kind"}}` mirrors
//! the objects of that kind too (a custom resource a test makes).

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use wasm_controller_sdk::{
    Action, Controller, Failure, Gvk, Registration, Request, Verb, Watch, cluster, config,
    export_controller,
};

/// The label whose value is copied.
const SOURCE: &str = "wcm.test/source";
/// The label the copy is written to, unless the settings name another.
const MIRRORED: &str = "wcm.test/mirrored";

/// The operator's settings.
#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Settings {
    mirrored_label: Option<String>,
    also_kind: Option<Kind>,
}

/// A kind named in the settings.
#[derive(serde::Deserialize)]
struct Kind {
    group: String,
    version: String,
    kind: String,
}

/// The plugin.
pub struct LabelMirror;

impl Controller for LabelMirror {
    fn registration() -> Registration {
        let registration = Registration::new("label-mirror", "0.1.0")
            .watch(Watch::all::<Pod>().labels(SOURCE))
            .watch(Watch::all::<ConfigMap>().labels(SOURCE))
            .permit::<Pod>(&[Verb::Patch])
            .permit::<ConfigMap>(&[Verb::Patch]);
        let also = config::settings::<Settings>()
            .ok()
            .flatten()
            .and_then(|s| s.also_kind);
        match also {
            Some(k) => {
                let kind = Gvk::new(&k.group, &k.version, &k.kind);
                registration
                    .watch(Watch::kind(kind.clone()).labels(SOURCE))
                    .permit_kind(kind, &[Verb::Patch])
            }
            None => registration,
        }
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let Some(target) = req.object() else {
            return Ok(Action::Done);
        };
        let object = match cluster::get_json(&target) {
            Ok(object) => object,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let settings = config::settings::<Settings>()?;
        let key = settings.and_then(|s| s.mirrored_label);
        let key = key.as_deref().unwrap_or(MIRRORED);
        let labels = &object["metadata"]["labels"];
        let (Some(source), mirrored) = (labels[SOURCE].as_str(), labels[key].as_str()) else {
            return Ok(Action::Done); // the label was removed: nothing to mirror
        };
        if mirrored != Some(source) {
            cluster::patch_labels(&target, &[(key, source)], &[])?;
        }
        Ok(Action::Done)
    }
}

export_controller!(LabelMirror);
