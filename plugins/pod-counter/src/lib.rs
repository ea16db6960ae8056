//! pod-counter: the classic pod controller as a Wasm plugin.
//!
//! It counts every Pod in the cluster, writes the total as the label
//! `pod-counter.example.com/count` on every control-plane Node, and records one
//! `Counted` Event on each Pod it counted. All Pod and Node changes map to one fixed
//! key, so a burst of events is one recount, not one per event.
//!
//! "Once per Pod" must survive restarts and fresh instances, so the plugin marks a
//! counted Pod with the label `pod-counter.example.com/counted=true` right after
//! recording its Event, and skips marked Pods afterwards. A reconcile cut between the
//! two (its deadline passed, the host was killed) records that one Pod's Event again:
//! at least once, never lost. To keep that window rare, one reconcile marks at most
//! [`BATCH`] Pods and asks to run again at once for the rest, so each stays far
//! inside the host's deadline even on a busy API server.

use k8s_openapi::api::core::v1::{Node, Pod};
use wasm_controller_sdk::{
    Action, Controller, Error, EventType, Failure, Gvk, ObjectRef, PartialObjectMeta, Predicate,
    Registration, Request, Verb, Watch, cluster, config, export_controller, log,
};

/// A Pod as pod-counter reads it: names and labels. Decoding metadata alone keeps the
/// full Pod decoder out of the component (392 KB instead of 853 KB, so the host
/// compiles it in half the time) and each batch cheap.
type PodMeta = PartialObjectMeta<Pod>;
/// A Node as pod-counter reads it.
type NodeMeta = PartialObjectMeta<Node>;

/// The label holding the count on control-plane Nodes.
pub const COUNT_LABEL: &str = "pod-counter.example.com/count";
/// The label marking a Pod whose `Counted` Event was recorded.
pub const COUNTED_LABEL: &str = "pod-counter.example.com/counted";
/// Role labels of control-plane Nodes: current, then the pre-1.20 name.
pub const CONTROL_PLANE_ROLES: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];
/// The registered version (the test variant's differs, so an upgrade shows in logs).
#[cfg(not(feature = "next-label-format"))]
const VERSION: &str = env!("CARGO_PKG_VERSION");
#[cfg(feature = "next-label-format")]
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-next");

/// The label value for `count` Pods.
pub fn count_value(count: usize) -> String {
    if cfg!(feature = "next-label-format") {
        format!("{count}-pods")
    } else {
        count.to_string()
    }
}

/// The selector of Pods not marked counted: `!` and [`COUNTED_LABEL`].
const UNCOUNTED: &str = "!pod-counter.example.com/counted";

/// The one key every change maps to.
const KEY: &str = "pod-count";
/// Pods marked per reconcile (two API calls each).
pub const BATCH: usize = 50;

/// The controller.
pub struct PodCounter;

impl Controller for PodCounter {
    fn registration() -> Registration {
        // An operator may run copies under other names (settings `name: ...`).
        let registration = Registration::new(&config::name_or("pod-counter"), VERSION)
            // Names and labels are all it reads: the caches hold metadata only, and
            // status updates (most of a Pod's updates) do not wake the count.
            .watch(
                Watch::all::<Pod>()
                    .metadata_only()
                    .when(Predicate::LabelsChanged)
                    .fixed_key(KEY),
            )
            .watch(
                Watch::all::<Node>()
                    .metadata_only()
                    .when(Predicate::LabelsChanged)
                    .fixed_key(KEY),
            )
            .permit::<Node>(&[Verb::Patch])
            .permit::<Pod>(&[Verb::Patch])
            .max_concurrent_reconciles(1);
        // The test variant also declares a watch, so upgrades can be seen to start and
        // release informers.
        #[cfg(feature = "next-label-format")]
        let registration = registration.watch(
            Watch::all::<k8s_openapi::api::core::v1::ConfigMap>()
                .labels("pod-counter.example.com/recount")
                .fixed_key(KEY),
        );
        registration
    }

    fn reconcile(_request: Request) -> Result<Action, Failure> {
        // Counted by the host: a recount in a burst of thousands of Pods copies none
        // of them into the plugin.
        let total = cluster::count(&Gvk::of::<Pod>(), None, None)?;
        let count = count_value(total);
        for node in control_plane_nodes()? {
            if node.labels().get(COUNT_LABEL) != Some(&count) {
                cluster::patch_labels(&ObjectRef::of(&node), &[(COUNT_LABEL, &count)], &[])?;
            }
        }
        // One more than a batch, to learn whether another reconcile is needed.
        let uncounted: Vec<PodMeta> = cluster::list_first(None, Some(UNCOUNTED), BATCH as u32 + 1)?;
        for pod in uncounted.iter().take(BATCH) {
            let target = ObjectRef::of(pod);
            let note = format!("counted; the cluster has {total} Pods");
            match cluster::record_event(&target, EventType::Normal, "Counted", &note) {
                // Its namespace is being deleted, or RBAC refuses Events there: the
                // others are counted; this one stays unmarked, tried on a later count.
                Err(e) if e.is_forbidden() => {
                    log::warn(&format!("no Counted Event for {}: {e}", target.name));
                    continue;
                }
                other => other?,
            }
            match cluster::patch_labels(&target, &[(COUNTED_LABEL, "true")], &[]) {
                Err(e) if e.is_not_found() => {} // deleted since it was listed
                other => other?,
            }
        }
        log::debug(&format!("{total} Pods"));
        if uncounted.len() > BATCH {
            return Ok(Action::RequeueAfter(0));
        }
        Ok(Action::Done)
    }
}

/// Nodes with the control-plane role label, or else the older master role label.
fn control_plane_nodes() -> Result<Vec<NodeMeta>, Error> {
    Ok(control_plane_of(cluster::list(None, None)?))
}

/// The Nodes that get the count: those with the first role label any Node carries.
pub fn control_plane_of(nodes: Vec<NodeMeta>) -> Vec<NodeMeta> {
    let has = |node: &NodeMeta, role: &str| node.labels().contains_key(role);
    CONTROL_PLANE_ROLES
        .iter()
        .map(|role| {
            nodes
                .iter()
                .filter(|n| has(n, role))
                .cloned()
                .collect::<Vec<_>>()
        })
        .find(|found| !found.is_empty())
        .unwrap_or_default()
}

export_controller!(PodCounter);

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn the_uncounted_selector_names_the_counted_label() {
        assert_eq!(UNCOUNTED, format!("!{COUNTED_LABEL}"));
    }

    fn node(name: &str, role: Option<&str>) -> NodeMeta {
        NodeMeta::new(ObjectMeta {
            name: Some(name.into()),
            labels: role.map(|r| [(r.to_string(), String::new())].into()),
            ..ObjectMeta::default()
        })
    }

    fn names(nodes: &[NodeMeta]) -> Vec<&str> {
        nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect()
    }

    #[test]
    fn control_plane_role_wins_over_the_master_role() {
        let nodes = vec![
            node("cp", Some("node-role.kubernetes.io/control-plane")),
            node("old", Some("node-role.kubernetes.io/master")),
            node("worker", None),
        ];
        assert_eq!(names(&control_plane_of(nodes)), ["cp"]);
    }

    #[test]
    fn the_master_role_is_the_fallback() {
        let nodes = vec![
            node("old", Some("node-role.kubernetes.io/master")),
            node("worker", None),
        ];
        assert_eq!(names(&control_plane_of(nodes)), ["old"]);
        assert!(control_plane_of(vec![node("worker", None)]).is_empty());
    }
}
