//! pod-counter and a Pod it cannot record an Event about: a Pod held (by a finalizer)
//! in a namespace being deleted, where the API server refuses new Events. The other
//! Pods are still counted, marked and get their `Counted` Event, and the count label
//! stays right; the held Pod is logged and left unmarked, not retried in a loop that
//! holds up the rest. Its own test binary: the held Pod is never marked, which the
//! other pod-counter tests, checking every Pod of the cluster, would not expect.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::objects::{all_pods, create_node, create_pod, events_about, node_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
const WAIT: Duration = Duration::from_secs(60);
const HOLD: &str = "wcm.test/hold";

/// A namespace being deleted, kept by one Pod with a finalizer; its name sorts before
/// the test namespaces', so pod-counter meets its Pod first.
async fn ending_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "held", "finalizers": [HOLD]},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), name);
    pods.create(&PostParams::default(), &pod).await?;
    namespaces.delete(name, &DeleteParams::default()).await?;
    let ending = eventually(WAIT, || async {
        let pod = pods.get("held").await.ok()?;
        pod.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    ending.context("the namespace's Pod was never deleted")
}

/// Lets the held Pod, and so its namespace, go.
async fn release(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), name);
    let patch = json!({"metadata": {"finalizers": null}});
    let _ = pods
        .patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

#[support::test]
async fn a_pod_whose_event_is_refused_does_not_hold_up_the_others() -> Result<()> {
    let ns = TestNamespace::create("ending").await?;
    let client = ns.client();
    let ending = format!("a-{}", ns.name());
    ending_namespace(&client, &ending).await?;
    let result = scenario(&client, &ns, &ending).await;
    release(&client, &ending).await;
    result
}

async fn scenario(client: &Client, ns: &TestNamespace, ending: &str) -> Result<()> {
    let node = format!("{}-control-plane", ns.name());
    create_node(client, &node, true, ns.labels()).await?;
    create_pod(client, ns.name(), "fine").await?;
    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let marked = eventually(WAIT, || async {
        let labels = pods.get("fine").await.ok()?.metadata.labels?;
        labels.contains_key(COUNTED).then_some(())
    })
    .await;
    marked.with_context(|| {
        format!(
            "the other Pod was not counted; log:\n{}",
            host.logs().join("\n")
        )
    })?;
    let events = events_about(client, ns.name(), "fine", "Counted").await?;
    ensure!(events.len() == 1, "Counted Events: {events:?}");
    let count = eventually(WAIT, || async {
        let pods = all_pods(client).await.ok()?.len();
        (node_label(client, &node, COUNT).await.ok()?? == pods.to_string()).then_some(())
    })
    .await;
    count.context("the count label does not match the cluster's Pods")?;
    host.wait_for_log(&["no Counted Event for held", "being terminated"], WAIT)
        .await?;
    let held: Api<Pod> = Api::namespaced(client.clone(), ending);
    let labels = held.get("held").await?.metadata.labels.unwrap_or_default();
    ensure!(
        !labels.contains_key(COUNTED),
        "the held Pod was marked counted"
    );
    Ok(())
}
