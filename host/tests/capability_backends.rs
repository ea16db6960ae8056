//! One capability pipeline over two backends: every refusal a `cluster` import makes
//! before a request — the target, the declared verb, the body, the selector, the kind
//! not watched, leadership — reads the same, word for word and field for field, from
//! the live cluster (a real API server) and from the test kit's in-memory one. A
//! plugin tested offline meets the refusals it will meet in a cluster.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::support::imports::Cluster;
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio::sync::watch;
use wcm_control_plane::TestNamespace;
use wcm_core::bindings::v0_3::wcm::controller::cluster::{
    DeleteOptions, Event, PatchType, Propagation,
};
use wcm_core::bindings::v0_3::wcm::controller::types::{
    Error as WitError, EventType, Gvk, ObjectRef,
};
use wcm_core::budget::{Budget, PluginBudget};
use wcm_core::capabilities::{ClusterAccess, Declared};
use wcm_core::contract::Verb;
use wcm_core::kube::informer::InformerRegistry;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::rights::Granted;
use wcm_core::runtime::HostState;
use wcm_tooling::testkit::offline_access;

const PLUGIN: &str = "backend-twin";

/// One import call with its arguments.
#[derive(Debug, Clone)]
enum Call {
    Get(ObjectRef),
    List(&'static str, Option<&'static str>),
    Count(&'static str, Option<&'static str>),
    PatchLabels(ObjectRef, &'static str, &'static str),
    PatchFinalizers(ObjectRef, &'static str),
    PatchStatus(ObjectRef, &'static str),
    Patch(ObjectRef, PatchType, &'static str, Option<&'static str>),
    Apply(String),
    Create(String),
    Update(String),
    Delete(ObjectRef),
    RecordEvent(ObjectRef, &'static str),
}

fn kind(kind: &str) -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
    }
}

fn object(kind_name: &str, ns: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: kind(kind_name),
        namespace: Some(ns.into()),
        name: name.into(),
    }
}

/// Makes `call` on `state`; its answer, or the error whole.
async fn make(state: &mut HostState, ns: &str, call: Call) -> Result<String, WitError> {
    let list_ns = Some(ns.to_string());
    match call {
        Call::Get(obj) => state.get(obj).await,
        Call::List(k, selector) => {
            let found = state.list(kind(k), list_ns, selector.map(String::from));
            found.await.map(|l| format!("{} objects", l.len()))
        }
        Call::Count(k, selector) => {
            let found = state.count(kind(k), list_ns, selector.map(String::from));
            found.await.map(|n| format!("{n} objects"))
        }
        Call::PatchLabels(obj, key, value) => {
            let set = vec![(key.to_string(), value.to_string())];
            state
                .patch_labels(obj, set, vec![])
                .await
                .map(|()| "patched".into())
        }
        Call::PatchFinalizers(obj, name) => {
            let add = vec![name.to_string()];
            (state.patch_finalizers(obj, add, vec![]).await).map(|()| "patched".into())
        }
        Call::PatchStatus(obj, status) => {
            (state.patch_status(obj, status.into()).await).map(|()| "patched".into())
        }
        Call::Patch(obj, kind, body, sub) => {
            state
                .patch(obj, kind, body.into(), sub.map(String::from))
                .await
        }
        Call::Apply(json) => state.apply(json, false).await,
        Call::Create(json) => state.create(json).await,
        Call::Update(json) => state.update(json).await,
        Call::Delete(obj) => {
            let options = DeleteOptions {
                propagation: Propagation::Background,
                uid: None,
                resource_version: None,
            };
            state.delete(obj, options).await.map(|()| "deleted".into())
        }
        Call::RecordEvent(regarding, reason) => {
            let event = Event {
                regarding,
                related: None,
                type_: EventType::Normal,
                reason: reason.into(),
                action: String::new(),
                note: "seen".into(),
            };
            state.record_event(event).await.map(|()| "recorded".into())
        }
    }
}

/// The refusals to compare, each with a word its message must hold (so a case that
/// stopped being refused, or is refused for another reason, is noticed too).
fn refusals(ns: &str) -> Vec<(Call, &'static str)> {
    let web = || object("ConfigMap", ns, "web");
    let secret = || object("Secret", ns, "key");
    let config_map = |extra: serde_json::Value| {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": ns}});
        let fields = extra.as_object().expect("an object").clone();
        cm.as_object_mut().expect("an object").extend(fields);
        cm.to_string()
    };
    let secret_json = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "key", "namespace": ns, "resourceVersion": "1"}})
    .to_string();
    vec![
        (Call::Get(object("ConfigMap", ns, "a/b")), "'/'"),
        (
            Call::Get(object("ConfigMap", ns, "missing")),
            "not in the cache",
        ),
        (Call::Get(secret()), "does not watch v1/Secret"),
        (Call::List("Secret", None), "does not watch v1/Secret"),
        (Call::List("ConfigMap", Some("app in (")), "app in ("),
        (Call::Count("ConfigMap", Some("=x")), "=x"),
        (
            Call::PatchLabels(secret(), "a", "b"),
            "did not declare the patch",
        ),
        (Call::PatchLabels(web(), "team", "not valid!"), "not valid!"),
        (
            Call::PatchFinalizers(secret(), "example.com/f"),
            "did not declare the patch",
        ),
        (
            Call::PatchFinalizers(web(), "Not A Finalizer"),
            "Not A Finalizer",
        ),
        (
            Call::PatchStatus(web(), "{not json"),
            "did not declare the patch/status",
        ),
        (
            Call::Patch(web(), PatchType::Merge, "{}", Some("exec")),
            "\"exec\"",
        ),
        (
            Call::Patch(secret(), PatchType::Merge, "{not json", None),
            "did not declare",
        ),
        (
            Call::Patch(web(), PatchType::Merge, "[1]", None),
            "a merge patch",
        ),
        (
            Call::Patch(web(), PatchType::Json, "{}", None),
            "a JSON patch",
        ),
        (
            Call::Patch(web(), PatchType::Merge, "{not json", None),
            "is not JSON",
        ),
        (
            Call::Apply(json!({"apiVersion": "v1"}).to_string()),
            "has no kind",
        ),
        (
            Call::Apply(secret_json.clone()),
            "did not declare the apply",
        ),
        (
            Call::Create(secret_json.clone()),
            "did not declare the create",
        ),
        (
            Call::Create(config_map(
                json!({"metadata": {"name": "new", "labels": 5}}),
            )),
            "not a Kubernetes object",
        ),
        (Call::Create("{\"kind\": ".into()), "is not JSON"),
        (
            Call::Update(config_map(json!({}))),
            "no metadata.resourceVersion",
        ),
        (Call::Update(secret_json), "did not declare the update"),
        (Call::Delete(secret()), "did not declare the delete"),
        (
            Call::RecordEvent(object("Pod", ns, "p"), "Seen"),
            "v1/Pod is neither",
        ),
        (Call::RecordEvent(web(), ""), "reason"),
    ]
}

/// ConfigMaps: read, patch, apply, create, update, delete (no status); Secrets: none.
fn declared() -> (HashMap<GroupVersionKind, HashSet<Verb>>, Arc<PluginBudget>) {
    let verbs = [
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Apply,
        Verb::Create,
        Verb::Update,
        Verb::Delete,
    ];
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let grants = HashMap::from([(gvk, HashSet::from(verbs))]);
    let budget = PluginBudget::new(PLUGIN, Budget::default(), Default::default());
    (grants, Arc::new(budget))
}

/// The plugin's state over the live cluster, watching ConfigMaps in `ns`.
async fn live(ns: &TestNamespace, leader: LeaderGate) -> Result<HostState> {
    let registry = Arc::new(InformerRegistry::new(ns.client(), Default::default()));
    let config_maps = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let informer = support::access::synced_informer(&registry, &config_maps, ns.name()).await?;
    let (grants, budget) = declared();
    let granted = (vec![informer], Arc::new(Granted::everything()));
    let access = ClusterAccess::live(
        budget,
        "test",
        registry,
        ns.client(),
        granted,
        grants,
        leader,
    );
    Ok(HostState::for_reconcile(
        Arc::new(access),
        "key".into(),
        64 << 20,
    ))
}

/// The plugin's state over the test kit's cluster of the same objects.
fn offline(ns: &str, fixtures: &[PathBuf], leader: LeaderGate) -> Result<HostState> {
    let (grants, budget) = declared();
    let watches = [(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some(ns.to_string()),
    )];
    let access = offline_access(Declared::new(budget, grants), &watches, fixtures)?;
    let access = access.with_leader(leader);
    Ok(HostState::for_reconcile(
        Arc::new(access),
        "key".into(),
        64 << 20,
    ))
}

/// The ConfigMap `web` in the live namespace, and as a fixture file.
async fn web_in_both(ns: &TestNamespace) -> Result<(tempfile::TempDir, PathBuf)> {
    let web = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": ns.name()}, "data": {"k": "v"}});
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(web.clone())?,
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, serde_json::to_string(&web)?)?;
    Ok((dir, file))
}

/// Makes every call on both states; fails naming each that differs.
async fn compare(
    ns: &str,
    calls: Vec<(Call, &'static str)>,
    (live, offline): (&mut HostState, &mut HostState),
) -> Result<()> {
    let mut differences = Vec::new();
    for (call, word) in calls {
        let in_cluster = make(live, ns, call.clone()).await;
        let in_memory = make(offline, ns, call.clone()).await;
        let refused = matches!(&in_cluster, Err(e) if e.message.contains(word));
        if format!("{in_cluster:?}") != format!("{in_memory:?}") || !refused {
            differences.push(format!(
                "{call:?} (expected a refusal saying {word:?}):\n  live:      {in_cluster:?}\n  in memory: {in_memory:?}"
            ));
        }
    }
    ensure!(differences.is_empty(), "{}", differences.join("\n"));
    Ok(())
}

#[support::test]
async fn every_refusal_reads_the_same_from_the_live_and_the_in_memory_cluster() -> Result<()> {
    let ns = TestNamespace::create("cap-twins").await?;
    let (_dir, fixtures) = web_in_both(&ns).await?;
    let mut in_cluster = live(&ns, LeaderGate::always_open()).await?;
    let mut in_memory = offline(
        ns.name(),
        std::slice::from_ref(&fixtures),
        LeaderGate::always_open(),
    )?;
    let states = (&mut in_cluster, &mut in_memory);
    compare(ns.name(), refusals(ns.name()), states).await?;

    // Once this replica stops leading, every write is refused the same way too.
    let (_stop, stopped) = watch::channel(false);
    let mut in_cluster = live(&ns, LeaderGate::following(stopped.clone())).await?;
    let mut in_memory = offline(ns.name(), &[fixtures], LeaderGate::following(stopped))?;
    let writes = vec![
        (
            Call::PatchLabels(object("ConfigMap", ns.name(), "web"), "a", "b"),
            "does not lead",
        ),
        (
            Call::Delete(object("ConfigMap", ns.name(), "web")),
            "does not lead",
        ),
        (
            Call::RecordEvent(object("ConfigMap", ns.name(), "web"), "Seen"),
            "does not lead",
        ),
    ];
    compare(ns.name(), writes, (&mut in_cluster, &mut in_memory)).await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let web = api.get("web").await.context("web is still there")?;
    ensure!(
        web.metadata.labels.is_none(),
        "nothing was written: {web:?}"
    );
    Ok(())
}
