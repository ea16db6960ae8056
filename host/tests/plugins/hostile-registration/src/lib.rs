//! Test plugin whose registration is the point, chosen by a Cargo feature:
//!
//! - `resync-1ms` and `resync-max` ask for a resync every millisecond and every
//!   `u64::MAX` milliseconds;
//! - `bad-selector` watches with a label selector that does not parse;
//! - `too-many-watches` declares 17 watches;
//! - `secrets` watches Secrets labelled `wcm.test/hostile-secret` in all namespaces
//!   (a kind the host may not be allowed to list) and labels each
//!   `wcm.test/seen=true`.
//!
//! Without a feature it is a harmless ConfigMap watcher.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasm_controller_sdk::{
    Action, Controller, Error, ObjectRef, Registration, Request, Verb, Watch, cluster,
    export_controller,
};

/// The plugin.
pub struct HostileRegistration;

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
} else {
    "hostile-none"
};

impl Controller for HostileRegistration {
    fn registration() -> Registration {
        let configmaps = Watch::all::<ConfigMap>().labels("wcm.test/hostile");
        let reg = Registration::new(NAME, "0.1.0");
        let reg = if cfg!(feature = "secrets") {
            reg.watch(Watch::all::<Secret>().labels("wcm.test/hostile-secret"))
                .permit::<Secret>(&[Verb::Patch])
        } else if cfg!(feature = "bad-selector") {
            reg.watch(Watch::all::<ConfigMap>().labels("app in web"))
        } else if cfg!(feature = "too-many-watches") {
            (0..17).fold(reg, |reg, _| reg.watch(configmaps.clone()))
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

    fn reconcile(req: Request) -> Result<Action, Error> {
        if cfg!(feature = "secrets") {
            let target = ObjectRef::new::<Secret>(req.namespace.as_deref(), &req.name);
            cluster::patch_labels(&target, &[("wcm.test/seen", "true")], &[])?;
        }
        Ok(Action::Done)
    }
}

export_controller!(HostileRegistration);
