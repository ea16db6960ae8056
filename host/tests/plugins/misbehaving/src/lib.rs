//! A hostile test plugin. It watches ConfigMaps labelled `wcm.test/misbehave` and, for
//! each, does what the ConfigMap's `behaviour` key says: `trap` panics, `loop` spins
//! forever, `grow` allocates until memory runs out, `sleep` labels it
//! `wcm.test/started=true`, waits in a host call (WASI's clock) for `seconds` (default
//! 3) and then acts as `ok`, and `ok` labels the
//! ConfigMap `wcm.test/handled=true` so a test can see the plugin works for that key.

use std::hint::black_box;

use k8s_openapi::api::core::v1::ConfigMap;
use wasm_controller_sdk::{
    Action, Controller, Error, ObjectRef, Registration, Request, Verb, Watch, cluster,
    export_controller,
};

/// The plugin.
pub struct Misbehaving;

impl Controller for Misbehaving {
    fn registration() -> Registration {
        Registration::new("misbehaving", "0.1.0")
            .watch(Watch::all::<ConfigMap>().labels("wcm.test/misbehave"))
            .permit::<ConfigMap>(&[Verb::Patch])
            .max_concurrent_reconciles(4)
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let cm: ConfigMap = cluster::get(req.namespace.as_deref(), &req.name)?;
        let behaviour = cm.data.as_ref().and_then(|d| d.get("behaviour")).cloned();
        match behaviour.as_deref() {
            Some("trap") => panic!("deliberate panic in reconcile of {}", req.name),
            Some("loop") => spin(),
            Some("grow") => grow(),
            Some("sleep") => {
                let target = ObjectRef::of(&cm);
                cluster::patch_labels(&target, &[("wcm.test/started", "true")], &[])?;
                let data = cm.data.as_ref();
                let seconds = data.and_then(|d| d.get("seconds")?.parse().ok());
                std::thread::sleep(std::time::Duration::from_secs(seconds.unwrap_or(3)));
                cluster::patch_labels(&target, &[("wcm.test/handled", "true")], &[])?;
                Ok(Action::Done)
            }
            _ => {
                let target = ObjectRef::of(&cm);
                cluster::patch_labels(&target, &[("wcm.test/handled", "true")], &[])?;
                Ok(Action::Done)
            }
        }
    }
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn grow() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(black_box(vec![1u8; 1 << 20]));
    }
}

export_controller!(Misbehaving);
