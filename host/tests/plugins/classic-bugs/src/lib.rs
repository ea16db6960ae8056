//! Test plugin: three bugs controllers really have, each beside its fixed twin, for
//! `wasm-controller-manager test --faults`. It watches ConfigMaps labelled
//! `wcm.test/classic` and their children (ConfigMaps it controls), and does what the
//! parent's `bug` key says:
//!
//! - `create-from-cache`: creates a child with a generated name when the cache holds
//!   none, then labels the parent `wcm.test/children=1`. A cache that has not seen the
//!   create yet makes a second child (found by `stale`). Fixed twin
//!   `create-by-name`: the child's name is fixed, and `already-exists` is success.
//! - `trust-marker`: labels the parent `wcm.test/phase=started`, creates the child
//!   `<name>-work`, then labels `phase=done`, and leaves alone a parent whose phase
//!   is set. A crash after the first label leaves a parent that never gets its child
//!   (found by `crash`). Fixed twin `check-state`: done only when the child exists.
//! - `swallow-error`: creates the child `<name>-made`, ignoring an error, then labels
//!   the parent `wcm.test/done=true` and leaves alone a parent so labelled. A failed
//!   create is never made again (found by `errors`). Fixed twin `return-error`.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasm_controller_sdk::owner::controller_reference;
use wasm_controller_sdk::{
    Action, Controller, Error, Failure, Gvk, ObjectRef, Registration, Request, Verb, Watch,
    cluster, export_controller,
};

/// The plugin.
pub struct ClassicBugs;

/// The label of a child naming its parent.
const CHILD_OF: &str = "wcm.test/child-of";

impl Controller for ClassicBugs {
    fn registration() -> Registration {
        Registration::new("classic-bugs", "0.1.0")
            .watch(Watch::all::<ConfigMap>().labels("wcm.test/classic"))
            .watch(
                Watch::all::<ConfigMap>()
                    .labels(CHILD_OF)
                    .owned_by::<ConfigMap>(),
            )
            .permit::<ConfigMap>(&[Verb::Create, Verb::Patch])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let parent: ConfigMap = match cluster::get(req.namespace.as_deref(), &req.name) {
            Ok(parent) => parent,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let bug = (parent.data.as_ref()).and_then(|d| d.get("bug").cloned());
        let label = |key: &str| {
            let labels = parent.metadata.labels.as_ref();
            labels.and_then(|l| l.get(key).cloned())
        };
        let me = ObjectRef::of(&parent);
        match bug.as_deref() {
            Some("create-from-cache") | Some("create-by-name") => {
                let selector = format!("{CHILD_OF}={}", req.name);
                let children =
                    cluster::list::<ConfigMap>(req.namespace.as_deref(), Some(&selector))?;
                if children.is_empty() {
                    let by_name = bug.as_deref() == Some("create-by-name");
                    let made = create_child(&parent, if by_name { "one" } else { "" });
                    made.or_else(|e| {
                        if by_name && e.is_already_exists() {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })?;
                }
                cluster::patch_labels(&me, &[("wcm.test/children", "1")], &[])?;
            }
            Some("trust-marker") if label("wcm.test/phase").is_some() => {}
            Some("check-state") if label("wcm.test/phase").as_deref() == Some("done") => {}
            Some("trust-marker") | Some("check-state") => {
                cluster::patch_labels(&me, &[("wcm.test/phase", "started")], &[])?;
                create_child(&parent, "work").or_else(exists_is_fine)?;
                cluster::patch_labels(&me, &[("wcm.test/phase", "done")], &[])?;
            }
            Some("swallow-error") | Some("return-error") if label("wcm.test/done").is_some() => {}
            Some("swallow-error") => {
                let _ = create_child(&parent, "made");
                cluster::patch_labels(&me, &[("wcm.test/done", "true")], &[])?;
            }
            Some("return-error") => {
                create_child(&parent, "made").or_else(exists_is_fine)?;
                cluster::patch_labels(&me, &[("wcm.test/done", "true")], &[])?;
            }
            _ => {}
        }
        Ok(Action::Done)
    }
}

/// Creates the child `<parent>-<suffix>` (a generated name after `<parent>-` when
/// `suffix` is empty), controlled by the parent.
fn create_child(parent: &ConfigMap, suffix: &str) -> Result<(), Error> {
    let name = parent.metadata.name.clone().unwrap_or_default();
    let owner = controller_reference(&Gvk::of::<ConfigMap>(), &parent.metadata)?;
    let (name, generate_name) = match suffix {
        "" => (None, Some(format!("{name}-"))),
        suffix => (Some(format!("{name}-{suffix}")), None),
    };
    let child = ConfigMap {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: parent.metadata.namespace.clone(),
            labels: Some(
                [(
                    CHILD_OF.to_string(),
                    parent.metadata.name.clone().unwrap_or_default(),
                )]
                .into(),
            ),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    cluster::create(&child).map(|_| ())
}

fn exists_is_fine(e: Error) -> Result<(), Error> {
    if e.is_already_exists() {
        Ok(())
    } else {
        Err(e)
    }
}

export_controller!(ClassicBugs);
