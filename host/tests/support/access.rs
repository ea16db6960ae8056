//! A plugin's host state built without Wasm, for calling the WIT imports directly:
//! its ConfigMap cache in one namespace, every verb on ConfigMaps, a budget.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::Result;
use kube::Client;
use kube::core::GroupVersionKind;
use wcm_core::budget::{Budget, PluginBudget};
use wcm_core::capabilities::ClusterAccess;
use wcm_core::contract::Verb;
use wcm_core::kube::informer::{Informer, InformerRegistry, WatchScope};
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::Metrics;
use wcm_core::rights::Granted;
use wcm_core::runtime::HostState;

/// An informer of `gvk` in `ns` from `registry`, watching for as long as it lives (a
/// hold does not keep it alive), its first list done.
pub async fn synced_informer(
    registry: &InformerRegistry,
    gvk: &GroupVersionKind,
    ns: &str,
) -> Result<Arc<Informer>> {
    let scope = WatchScope {
        gvk: gvk.clone(),
        namespace: Some(ns.into()),
        label_selector: None,
        field_selector: None,
        metadata_only: false,
    };
    let informer = registry.acquire(scope).await?;
    std::mem::forget(informer.hold());
    informer.wait_synced().await;
    Ok(informer)
}

/// The host state of `plugin`, which watches ConfigMaps in `ns` and may do anything
/// with them, writing only while `leader` is open and within `budget`.
pub async fn config_map_plugin(
    plugin: &str,
    ns: &str,
    client: Client,
    leader: LeaderGate,
    budget: Budget,
) -> Result<HostState> {
    let (access, _) =
        config_map_access(plugin, ns, client, (leader, budget), Default::default()).await?;
    Ok(HostState::for_reconcile(
        Arc::new(access),
        "key".into(),
        64 << 20,
    ))
}

/// The cluster access behind [`config_map_plugin`], reporting to `metrics`, and the
/// informer of its ConfigMaps (synced).
pub async fn config_map_access(
    plugin: &str,
    ns: &str,
    client: Client,
    (leader, budget): (LeaderGate, Budget),
    metrics: Arc<Metrics>,
) -> Result<(ClusterAccess, Arc<Informer>)> {
    let registry = Arc::new(InformerRegistry::new(client.clone(), metrics.clone()));
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let informer = synced_informer(&registry, &gvk, ns).await?;
    let verbs = [
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Apply,
        Verb::PatchStatus,
        Verb::Delete,
        Verb::Create,
        Verb::Update,
    ];
    let grants = HashMap::from([(gvk, HashSet::from(verbs))]);
    let budget = Arc::new(PluginBudget::new(plugin, budget, metrics));
    let access = ClusterAccess::live(
        budget,
        "test-host",
        registry,
        client,
        (vec![informer.clone()], Arc::new(Granted::everything())),
        grants,
        leader,
    );
    Ok((access, informer))
}
