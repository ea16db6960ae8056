//! The in-memory cluster a plugin reaches offline — its fixtures in a store, seen
//! through its watches — and the plugin's access to it, through the same capability
//! pipeline as in the daemon; also for the host's tests that hold the two backends to
//! the same answers.

use std::path::PathBuf;
use std::sync::Arc;

use kube::core::GroupVersionKind;

use super::fixtures::{self, FixtureError, Scopes};
use super::memory::{MemoryCluster, Watch};
use serde_json::Value;

use super::store::{ObjectId, Store};
use wcm_core::budget::{Budget, PluginBudget};
use wcm_core::capabilities::{ClusterAccess, Declared, grants};
use wcm_core::contract::{KeyMapping as WitMapping, Predicate, Registration};
use wcm_core::keys::{KeyMapping, from_wit_gvk};
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::Metrics;
use wcm_core::metrics::plugin::PluginMetrics;
use wcm_core::rights::Granted;

/// The fixtures of a run (files or directories) and those of them to leave out.
pub(super) type Fixtures<'a> = (&'a [PathBuf], &'a [PathBuf]);

/// The in-memory cluster of `fixtures` as the plugin of `registration` sees it, and
/// the plugin's access to it.
pub(super) fn of_registration(
    registration: &Registration,
    (paths, left_out): Fixtures<'_>,
) -> Result<(Arc<MemoryCluster>, ClusterAccess), FixtureError> {
    let (objects, scopes) = fixtures::read(paths, left_out)?;
    of_objects(registration, objects, scopes)
}

/// The in-memory cluster of fixtures read already (`objects` in `scopes`) as the
/// plugin of `registration` sees it, and the plugin's access to it.
pub(super) fn of_objects(
    registration: &Registration,
    objects: Vec<(ObjectId, Value)>,
    scopes: Scopes,
) -> Result<(Arc<MemoryCluster>, ClusterAccess), FixtureError> {
    let store = store_of(objects)?;
    let watches = watches_of(registration, &scopes);
    let cluster = MemoryCluster::new(&registration.name, watches, scopes, store);
    let cluster = Arc::new(cluster);
    let access = access(declared_by(registration), cluster.clone());
    Ok((cluster, access))
}

/// The access of the plugin of `declared` to an in-memory cluster of the objects in
/// `fixtures`, watching every object of each kind in each namespace of `watches`
/// (all namespaces for none): the capability pipeline over the test kit's backend,
/// without a plugin.
pub fn offline_access(
    declared: Declared,
    watches: &[(GroupVersionKind, Option<String>)],
    fixtures: &[PathBuf],
) -> Result<ClusterAccess, FixtureError> {
    let (objects, scopes) = fixtures::read(fixtures, &[])?;
    let watches = (watches.iter())
        .map(|(gvk, namespace)| Watch::of(gvk.clone(), namespace.clone()))
        .collect();
    let plugin = declared.plugin.clone();
    let cluster = MemoryCluster::new(&plugin, watches, scopes, store_of(objects)?);
    Ok(access(declared, Arc::new(cluster)))
}

/// The plugin's access to `cluster`: every watch readable (no RBAC offline), always
/// the leader.
fn access(declared: Declared, cluster: Arc<MemoryCluster>) -> ClusterAccess {
    let granted = Arc::new(Granted::everything());
    ClusterAccess::over(declared, granted, LeaderGate::always_open(), cluster)
}

/// A store of `objects`; two of the same address are refused, naming it.
fn store_of(objects: Vec<(ObjectId, Value)>) -> Result<Store, FixtureError> {
    let mut store = Store::default();
    for (id, object) in objects {
        let name = format!("{} {:?}/{}", id.kind, id.namespace, id.name);
        (store.insert(id, object)).map_err(|cause| FixtureError::Duplicate {
            object: name,
            cause,
        })?;
    }
    Ok(store)
}

/// The watches of `registration`, as informers would hold them.
fn watches_of(registration: &Registration, scopes: &Scopes) -> Vec<Watch> {
    (registration.watches.iter())
        .flat_map(|w| {
            let gvk = from_wit_gvk(&w.kind);
            let mapping = match &w.maps_to {
                WitMapping::Object => KeyMapping::Object(gvk.clone()),
                WitMapping::Fixed(key) => KeyMapping::Fixed(key.clone()),
                WitMapping::ControllerOwner(owner) => KeyMapping::ControllerOwner {
                    namespaced: scopes.namespaced(&owner.group, &owner.kind),
                    owner: from_wit_gvk(owner),
                },
            };
            // Selectors were checked when the registration was validated.
            let selector = w.label_selector.as_deref().unwrap_or("");
            let selector = wcm_core::kube::selector::parse(selector).unwrap_or_default();
            let fields =
                wcm_core::kube::field_selector::parse(w.field_selector.as_deref().unwrap_or(""));
            let fields = fields.unwrap_or_default();
            (w.informer_namespaces().into_iter()).map(move |namespace| Watch {
                gvk: gvk.clone(),
                namespace,
                selector: selector.clone(),
                fields: fields.clone(),
                metadata_only: w.metadata_only,
                predicates: Predicate::parse_known(&w.predicates),
                mapping: mapping.clone(),
            })
        })
        .collect()
}

/// The plugin's declarations, with no API rate: offline there is no API server to
/// protect, so a run takes no longer than its calls.
fn declared_by(registration: &Registration) -> Declared {
    let metrics = Arc::new(Metrics::new());
    let mut unlimited = Budget::default();
    unlimited.api.qps = 0.0;
    let budget = PluginBudget::new(&registration.name, unlimited, metrics);
    let metrics = PluginMetrics::new(
        &registration.name,
        &registration.metrics,
        budget.budget.metrics.max_series,
    );
    Declared::new(Arc::new(budget), grants(registration)).with_metrics(Arc::new(metrics))
}
