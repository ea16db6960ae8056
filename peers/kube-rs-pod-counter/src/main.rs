//! pod-counter written natively with kube-rs and kube-runtime, with exactly the
//! plugin's semantics (`plugins/pod-counter`), so `make bench` can put the host next to
//! the native controller an engineer would write instead: every Pod and Node change
//! (creates, deletes, label changes; metadata-only watches) wakes one fixed key; a
//! recount writes the count as the label `pod-counter.example.com/count` on the
//! control-plane Nodes, then records a `Counted` Event (events.k8s.io, kube-runtime's
//! `Recorder`) and sets the label `pod-counter.example.com/counted=true` on at most 50
//! uncounted Pods, and runs again at once while more remain.
//!
//! Not part of the product: built by `make bench` only.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use anyhow::Result;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

const COUNT_LABEL: &str = "pod-counter.example.com/count";
const COUNTED_LABEL: &str = "pod-counter.example.com/counted";
const CONTROL_PLANE_ROLES: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];
/// Pods marked per recount, as the plugin's `BATCH`.
const BATCH: usize = 50;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = Client::try_default().await?;
    // One slot: a burst of changes while a recount runs is one more recount.
    let (wake, mut woken) = mpsc::channel::<()>(1);
    let pods = watch_metadata(
        Api::<PartialObjectMeta<Pod>>::all(client.clone()),
        wake.clone(),
    );
    let nodes = watch_metadata(Api::<PartialObjectMeta<Node>>::all(client.clone()), wake);
    pods.wait_until_ready().await?;
    nodes.wait_until_ready().await?;
    let recorder = Recorder::new(client.clone(), Reporter::from("kube-rs-pod-counter"));
    let mut backoff = Duration::from_millis(5);
    while woken.recv().await.is_some() {
        loop {
            match recount(&client, &recorder, &pods, &nodes).await {
                Ok(true) => continue,
                Ok(false) => backoff = Duration::from_millis(5),
                Err(e) => {
                    tracing::warn!("recount failed: {e:#}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            }
            break;
        }
    }
    Ok(())
}

/// A metadata-only reflector of `api` whose creates, deletes and label changes wake
/// the key (the plugin's `labels-changed` predicate; relists always wake it).
fn watch_metadata<K>(
    api: Api<PartialObjectMeta<K>>,
    wake: mpsc::Sender<()>,
) -> Store<PartialObjectMeta<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    tokio::spawn(wake_on_changes(events, wake));
    store
}

/// Wakes the key for every event that passes the labels predicate.
async fn wake_on_changes<K: kube::Resource>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>>,
    wake: mpsc::Sender<()>,
) {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let changed = match event {
            Ok(watcher::Event::Apply(o)) => {
                let labels = labels_hash(&o);
                seen.insert(o.uid().unwrap_or_default(), labels) != Some(labels)
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.remove(&o.uid().unwrap_or_default());
                true
            }
            Ok(watcher::Event::InitApply(o)) => {
                seen.insert(o.uid().unwrap_or_default(), labels_hash(&o));
                false
            }
            Ok(watcher::Event::InitDone) => true,
            Ok(watcher::Event::Init) | Err(_) => false,
        };
        if changed {
            let _ = wake.try_send(());
        }
    }
}

fn labels_hash<K: kube::Resource>(o: &K) -> u64 {
    let mut hasher = DefaultHasher::new();
    o.labels().hash(&mut hasher);
    hasher.finish()
}

/// One recount; true when uncounted Pods remain for another.
async fn recount(
    client: &Client,
    recorder: &Recorder,
    pods: &Store<PartialObjectMeta<Pod>>,
    nodes: &Store<PartialObjectMeta<Node>>,
) -> Result<bool> {
    let pods = pods.state();
    let count = pods.len().to_string();
    let node_api: Api<Node> = Api::all(client.clone());
    for node in control_plane(&nodes.state()) {
        if node.labels().get(COUNT_LABEL) != Some(&count) {
            let patch = json!({"metadata": {"labels": {COUNT_LABEL: count}}});
            node_api
                .patch(
                    &node.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
    }
    let uncounted: Vec<_> = pods
        .iter()
        .filter(|p| !p.labels().contains_key(COUNTED_LABEL))
        .collect();
    for pod in uncounted.iter().take(BATCH) {
        mark(client, recorder, pod, pods.len()).await?;
    }
    Ok(uncounted.len() > BATCH)
}

/// Records the Pod's `Counted` Event, then marks it counted.
async fn mark(
    client: &Client,
    recorder: &Recorder,
    pod: &PartialObjectMeta<Pod>,
    total: usize,
) -> Result<()> {
    let namespace = pod.namespace().unwrap_or_default();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name_any()),
        namespace: Some(namespace.clone()),
        uid: pod.uid(),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Counted".into(),
        note: Some(format!("counted; the cluster has {total} Pods")),
        action: "Count".into(),
        secondary: None,
    };
    match recorder.publish(&event, &reference).await {
        Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()), // tried on a later count
        other => other?,
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let patch = json!({"metadata": {"labels": {COUNTED_LABEL: "true"}}});
    match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()), // deleted since
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// The Nodes with the first control-plane role label any Node carries.
fn control_plane<N: std::ops::Deref<Target = PartialObjectMeta<Node>>>(
    nodes: &[N],
) -> Vec<&PartialObjectMeta<Node>> {
    CONTROL_PLANE_ROLES
        .iter()
        .map(|role| {
            (nodes.iter())
                .map(|n| &**n)
                .filter(|n| n.labels().contains_key(*role))
                .collect::<Vec<_>>()
        })
        .find(|found| !found.is_empty())
        .unwrap_or_default()
}
