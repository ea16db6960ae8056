//! Reconcile correctness under churn: 2,000 Pods created in bursts reach the right end
//! state in two plugins at once, one with a fixed key and one with a key per object;
//! the fixed key collapses thousands of events into a few dozen reconciles.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::future::try_join_all;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use support::objects::{all_pods, create_labelled_pod, create_node, node_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const PODS: usize = 2_000;
const BURST: usize = 200;
const CONVERGE: Duration = Duration::from_secs(300);
const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
const SOURCE: &str = "wcm.test/source";
const MIRRORED: &str = "wcm.test/mirrored";

#[support::test]
async fn two_thousand_pods_in_bursts_converge_with_few_reconciles() -> Result<()> {
    let ns = TestNamespace::create("churn").await?;
    let client = ns.client();
    let node = format!("{}-cp", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("label-mirror.wasm", plugin_bytes("label-mirror")),
    ])?;
    // Correctness under churn, not the API budget: both plugins may write as fast
    // as the API server takes it (the default, 20 per second, would take minutes).
    let host = HostProcess::start(
        dir.path(),
        &["--plugin-api-qps=1000", "--plugin-api-burst=1000"],
    )?;
    for plugin in ["pod-counter", "label-mirror"] {
        let plugin = format!("plugin={plugin}");
        host.wait_for_log(&["plugin loaded", &plugin], CONVERGE)
            .await?;
    }

    for burst in 0..PODS / BURST {
        let creates = (0..BURST).map(|i| create_pod(&client, ns.name(), burst * BURST + i));
        try_join_all(creates).await?;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let total = eventually(CONVERGE, || async {
        let pods = all_pods(&client).await.ok()?.len();
        let label = node_label(&client, &node, COUNT).await.ok()??;
        (label == pods.to_string()).then_some(pods)
    })
    .await
    .context("pod-counter's label never matched the number of Pods")?;
    ensure!(total >= PODS, "only {total} Pods in the cluster");
    every_pod_counted_and_mirrored(&client, ns.name()).await?;
    let failures = host.lines_with(&["reconcile failed"]);
    counted_events_once_each(&client, ns.name())
        .await
        .with_context(|| format!("failed reconciles: {failures:#?}"))?;
    reconciles_stay_below_events(&host).await
}

/// Creates Pod `n` with a source label for label-mirror (a few distinct values).
async fn create_pod(client: &Client, ns: &str, n: usize) -> Result<Pod> {
    let value = format!("v{}", n % 7);
    create_labelled_pod(client, ns, &format!("pod-{n}"), &[(SOURCE, &value)]).await
}

async fn every_pod_counted_and_mirrored(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let wrong = |pods: &[Pod]| -> Vec<String> {
        pods.iter()
            .filter(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                !labels.contains_key(COUNTED) || labels.get(MIRRORED) != labels.get(SOURCE)
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let done = eventually(CONVERGE, || async {
        let pods = api.list(&ListParams::default()).await.ok()?.items;
        (pods.len() == PODS && wrong(&pods).is_empty()).then_some(())
    })
    .await;
    if done.is_none() {
        let pods = api.list(&ListParams::default()).await?.items;
        let left = wrong(&pods);
        anyhow::bail!(
            "{} Pods not counted or not mirrored, e.g. {:?}",
            left.len(),
            &left[..left.len().min(5)]
        );
    }
    Ok(())
}

/// pod-counter records exactly one `Counted` Event per Pod: none lost, none doubled.
async fn counted_events_once_each(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = api.list(&ListParams::default()).await?.items;
    let mut counted: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Counted"))
        .filter_map(|e| e.regarding.as_ref()?.name.clone())
        .collect();
    counted.sort();
    let before = counted.len();
    counted.dedup();
    ensure!(
        before == counted.len(),
        "{} duplicate Counted Events",
        before - counted.len()
    );
    ensure!(
        counted.len() == PODS,
        "{} Counted Events for {PODS} Pods",
        counted.len()
    );
    Ok(())
}

/// Every event is delivered, but bursts collapse in the queue: pod-counter maps all to
/// one key, so it reconciles a small fraction of the events it gets. label-mirror has
/// one key per Pod and each event is a new state of that Pod, so little collapses
/// there, but it never reconciles more often than it is told to.
async fn reconciles_stay_below_events(host: &HostProcess) -> Result<()> {
    let mut report = Vec::new();
    let mut ratios = Vec::new();
    for plugin in ["pod-counter", "label-mirror"] {
        let labels = [("plugin", plugin)];
        let controller = [("controller", plugin)];
        let events = host.metric("wcm_plugin_events_total", &labels).await?;
        let reconciles = host
            .metric("controller_runtime_reconcile_total", &controller)
            .await?;
        let busy = host
            .metric("controller_runtime_reconcile_time_seconds_sum", &controller)
            .await?;
        report.push(format!(
            "{plugin}: {reconciles} reconciles ({busy:.1} s) for {events} events"
        ));
        ensure!(
            events >= PODS as f64,
            "{plugin} got {events} events for {PODS} Pods"
        );
        ratios.push(reconciles / events);
    }
    let report = report.join("; ");
    println!("{report}");
    ensure!(ratios[0] < 0.05, "bursts did not collapse: {report}");
    ensure!(ratios[1] <= 1.0, "more reconciles than events: {report}");
    Ok(())
}
