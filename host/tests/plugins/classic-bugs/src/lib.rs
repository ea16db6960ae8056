//! Test plugin: six bugs controllers really have, each beside its fixed twin, for
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
//! - `generate-then-mark`: creates a child with a generated name, then labels the
//!   parent `wcm.test/made=true`, and leaves alone a parent so labelled: not
//!   idempotent, a crash between the two writes makes a second child (found by
//!   `crash`). Fixed twin `name-then-mark`: a fixed name, `already-exists` is success.
//! - `lost-update`: adds its name to the `members` of the ConfigMap `index` (read
//!   from the cache) by a merge patch without a precondition: read stale, it writes
//!   over another parent's addition (found by `stale`). Fixed twin
//!   `update-with-version`: an update carrying the resourceVersion it read, so a
//!   stale read is a conflict, retried.
//! - `edge-triggered`: labels the parent `wcm.test/started=true` when it sees its
//!   `phase` go from `Pending` to `Running` (the phase it saw last kept in the label
//!   `wcm.test/last-phase`): it assumes it sees every intermediate state, and a
//!   `Pending` it was never told of starts nothing (found by `coalesce`). Fixed twin
//!   `level-triggered`: started whenever the phase is `Running`.

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
            .permit::<ConfigMap>(&[Verb::Create, Verb::Patch, Verb::Update])
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
        let data = |key: &str| {
            let data = parent.data.as_ref();
            data.and_then(|d| d.get(key).cloned()).unwrap_or_default()
        };
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
            Some("generate-then-mark") | Some("name-then-mark")
                if label("wcm.test/made").is_some() => {}
            Some("generate-then-mark") => {
                create_child(&parent, "")?;
                cluster::patch_labels(&me, &[("wcm.test/made", "true")], &[])?;
            }
            Some("name-then-mark") => {
                create_child(&parent, "made").or_else(exists_is_fine)?;
                cluster::patch_labels(&me, &[("wcm.test/made", "true")], &[])?;
            }
            Some(bug @ ("lost-update" | "update-with-version")) => {
                join_index(
                    req.namespace.as_deref(),
                    &req.name,
                    bug == "update-with-version",
                )?;
            }
            Some(bug @ ("edge-triggered" | "level-triggered")) => {
                let phase = data("phase");
                let last = label("wcm.test/last-phase").unwrap_or_default();
                let started = match bug {
                    "edge-triggered" => last == "Pending" && phase == "Running",
                    _ => phase == "Running",
                };
                let mut set = vec![("wcm.test/last-phase", phase.as_str())];
                if started {
                    set.push(("wcm.test/started", "true"));
                }
                cluster::patch_labels(&me, &set, &[])?;
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

/// Adds `name` to the `members` of the ConfigMap `index`, as read from the cache: by
/// a merge patch without a precondition, or (`with_version`) by an update carrying
/// the resourceVersion read.
fn join_index(namespace: Option<&str>, name: &str, with_version: bool) -> Result<(), Error> {
    let mut index: ConfigMap = cluster::get(namespace, "index")?;
    let data = index.data.get_or_insert_with(Default::default);
    let members = data.get("members").cloned().unwrap_or_default();
    let mut names: Vec<&str> = members.split(',').filter(|m| !m.is_empty()).collect();
    if names.contains(&name) {
        return Ok(());
    }
    names.push(name);
    names.sort_unstable(); // a set: the order reconciles ran in does not show
    let joined = names.join(",");
    if with_version {
        data.insert("members".into(), joined);
        return cluster::update(&index).map(|_| ());
    }
    let patch = serde_json::json!({"data": {"members": joined}});
    cluster::merge_patch(&ObjectRef::of(&index), &patch).map(|_| ())
}

fn exists_is_fine(e: Error) -> Result<(), Error> {
    if e.is_already_exists() {
        Ok(())
    } else {
        Err(e)
    }
}

export_controller!(ClassicBugs);
