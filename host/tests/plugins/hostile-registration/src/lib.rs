//! Test plugin whose registration is the point, chosen by a Cargo feature:
//!
//! - `resync-1ms` and `resync-max` ask for a resync every millisecond and every
//!   `u64::MAX` milliseconds;
//! - `bad-selector` watches with a label selector that does not parse;
//! - `too-many-watches` declares 17 watches;
//! - `secrets` watches Secrets labelled `wcm.test/hostile-secret` in all namespaces
//!   (a kind the host may not be allowed to list), reads each from its cache and
//!   labels it `wcm.test/seen=true`;
//! - `secrets-peek` does the same with `wcm.test/peeked=true`, under another name,
//!   so one ServiceAccount can be granted Secrets and the other not;
//! - `namespace-a` watches ConfigMaps in namespace `wcm-rights-a` labelled
//!   `wcm.test/touch` and labels the ConfigMap of the same name in the namespace that
//!   label names `wcm.test/touched=true` (granted a Role in `wcm-rights-a` only, its
//!   writes elsewhere must be refused by the API server).
//!
//! - `unsupported-field` watches ConfigMaps by a field selector the API server does
//!   not support for them (`spec.nodeName`): well-formed, so it loads, and the API
//!   server's refusal of the list shows as the plugin's problem.
//!
//! - `many-informers` watches ConfigMaps labelled `wcm.test/many` sixteen times, each
//!   with another field selector that excludes nothing (`metadata.name!=not-<i>`):
//!   sixteen informers holding the same objects, the host's caches multiplied.
//!
//! - `metrics` declares one gauge, named by its settings' `metric` (`value`
//!   by default), with a label `text`, and sets it, for each ConfigMap labelled
//!   `wcm.test/hostile-metrics`, with the label value of the ConfigMap's `text`; it
//!   watches them through a field selector full of escapes: copies under chosen file
//!   names try to name their metrics as the host's or each other's.
//!
//! Without a feature it is a harmless ConfigMap watcher.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasm_controller_sdk::{
    Action, Controller, Failure, ObjectRef, Registration, Request, Verb, Watch, cluster, config,
    export_controller, metrics,
};

/// The plugin.
pub struct HostileRegistration;

/// The one namespace `namespace-a` watches.
const NAMESPACE_A: &str = "wcm-rights-a";
/// The label naming the namespace `namespace-a` writes to.
const TOUCH: &str = "wcm.test/touch";

/// The plugin's name: `hostile-` and the variant.
const NAME: &str = if cfg!(feature = "resync-1ms") {
    "hostile-resync-1ms"
} else if cfg!(feature = "resync-max") {
    "hostile-resync-max"
} else if cfg!(feature = "bad-selector") {
    "hostile-bad-selector"
} else if cfg!(feature = "too-many-watches") {
    "hostile-too-many-watches"
} else if cfg!(feature = "secrets") {
    "hostile-secrets"
} else if cfg!(feature = "secrets-peek") {
    "hostile-secrets-peek"
} else if cfg!(feature = "namespace-a") {
    "hostile-namespace-a"
} else if cfg!(feature = "unsupported-field") {
    "hostile-unsupported-field"
} else if cfg!(feature = "many-informers") {
    "hostile-many-informers"
} else if cfg!(feature = "metrics") {
    "hostile-metrics"
} else {
    "hostile-none"
};

impl Controller for HostileRegistration {
    fn registration() -> Registration {
        let configmaps = Watch::all::<ConfigMap>().labels("wcm.test/hostile");
        let reg = Registration::new(NAME, "0.1.0");
        let reg = if cfg!(any(feature = "secrets", feature = "secrets-peek")) {
            reg.watch(Watch::all::<Secret>().labels("wcm.test/hostile-secret"))
                .permit::<Secret>(&[Verb::Patch])
        } else if cfg!(feature = "namespace-a") {
            reg.watch(
                Watch::all::<ConfigMap>()
                    .in_namespace(NAMESPACE_A)
                    .labels(TOUCH),
            )
            .permit::<ConfigMap>(&[Verb::Patch])
        } else if cfg!(feature = "bad-selector") {
            reg.watch(Watch::all::<ConfigMap>().labels("app in web"))
        } else if cfg!(feature = "unsupported-field") {
            reg.watch(configmaps.clone().fields("spec.nodeName=node-1"))
        } else if cfg!(feature = "too-many-watches") {
            (0..17).fold(reg, |reg, _| reg.watch(configmaps.clone()))
        } else if cfg!(feature = "metrics") {
            let settings: Option<serde_json::Value> = config::settings().ok().flatten();
            let metric = settings
                .as_ref()
                .and_then(|s| s["metric"].as_str().map(String::from));
            let metric = metric.unwrap_or_else(|| "value".into());
            let watch = Watch::all::<ConfigMap>()
                .labels("wcm.test/hostile-metrics")
                .fields(r"metadata.name!=a\,b\=c\\d");
            reg.watch(watch)
                .gauge(&metric, "Hostile label values", &["text"])
        } else if cfg!(feature = "many-informers") {
            let many = Watch::all::<ConfigMap>().labels("wcm.test/many");
            (0..16).fold(reg, |reg, i| {
                reg.watch(many.clone().fields(&format!("metadata.name!=not-{i}")))
            })
        } else {
            reg.watch(configmaps)
        };
        let millis = if cfg!(feature = "resync-1ms") {
            Some(1)
        } else if cfg!(feature = "resync-max") {
            Some(u64::MAX)
        } else {
            None
        };
        Registration {
            resync_period_ms: millis,
            ..reg
        }
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let namespace = req.namespace.as_deref();
        if cfg!(any(feature = "secrets", feature = "secrets-peek")) {
            cluster::get::<Secret>(namespace, &req.name)?;
            let label = match cfg!(feature = "secrets") {
                true => "wcm.test/seen",
                false => "wcm.test/peeked",
            };
            let target = ObjectRef::new::<Secret>(namespace, &req.name);
            cluster::patch_labels(&target, &[(label, "true")], &[])?;
        } else if cfg!(feature = "metrics") {
            let source = cluster::get::<ConfigMap>(namespace, &req.name)?;
            let data = source.data.unwrap_or_default();
            let text = data.get("text").map(String::as_str).unwrap_or_default();
            let settings: Option<serde_json::Value> = config::settings().ok().flatten();
            let metric = settings
                .as_ref()
                .and_then(|s| s["metric"].as_str().map(String::from));
            metrics::set(metric.as_deref().unwrap_or("value"), &[text], 1.0)?;
        } else if cfg!(feature = "namespace-a") {
            let source = cluster::get::<ConfigMap>(namespace, &req.name)?;
            let labels = source.metadata.labels.unwrap_or_default();
            let Some(there) = labels.get(TOUCH) else {
                return Ok(Action::Done);
            };
            let target = ObjectRef::new::<ConfigMap>(Some(there), &req.name);
            cluster::patch_labels(&target, &[("wcm.test/touched", "true")], &[])?;
        }
        Ok(Action::Done)
    }
}

export_controller!(HostileRegistration);
