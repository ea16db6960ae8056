//! pod-counter end to end against the real control plane: the count label on the
//! control-plane Node, one `Counted` Event per Pod, deletions, and a restart.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::future::try_join_all;
use kube::Client;
use support::objects::{all_pods, create_node, create_pod, delete_pod, events_about, node_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
const CONVERGE: Duration = Duration::from_secs(60);

/// Waits until the Node's count label equals the number of Pods in the cluster and
/// returns that number.
async fn label_matches_cluster(client: &Client, node: &str) -> Result<usize> {
    let found = eventually(CONVERGE, || async {
        let pods = all_pods(client).await.ok()?.len();
        let label = node_label(client, node, COUNT).await.ok()??;
        (label == pods.to_string()).then_some(pods)
    })
    .await;
    let label = node_label(client, node, COUNT).await?;
    found.with_context(|| format!("label {label:?} never matched the Pod count"))
}

/// Waits until every Pod is marked counted, then checks each has one Counted Event.
async fn each_pod_counted_once(client: &Client, pods: &[(String, String)]) -> Result<()> {
    let all_marked = eventually(CONVERGE, || async {
        let listed = all_pods(client).await.ok()?;
        let marked = listed
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(COUNTED))
            })
            .count();
        (marked == listed.len()).then_some(())
    })
    .await;
    all_marked.context("not every Pod was marked counted")?;
    for (ns, name) in pods {
        let events = events_about(client, ns, name, "Counted").await?;
        ensure!(
            events.len() == 1,
            "{ns}/{name} has {} Counted Events",
            events.len()
        );
        let event = &events[0];
        assert_eq!(event.reporting_controller.as_deref(), Some("pod-counter"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
    }
    Ok(())
}

#[support::test]
async fn counts_pods_into_the_control_plane_label_once_per_pod_across_a_restart() -> Result<()> {
    let namespaces = [
        TestNamespace::create("pc-a").await?,
        TestNamespace::create("pc-b").await?,
        TestNamespace::create("pc-c").await?,
    ];
    let client = namespaces[0].client();
    let cp_node = format!("{}-control-plane", namespaces[0].name());
    let worker = format!("{}-worker", namespaces[0].name());
    create_node(&client, &cp_node, true, namespaces[0].labels()).await?;
    create_node(&client, &worker, false, namespaces[0].labels()).await?;
    let already = all_pods(&client).await?.len();

    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    // A burst: 25 Pods created at once.
    let mut pods: Vec<(String, String)> = (0..25)
        .map(|i| (namespaces[i % 3].name().to_string(), format!("pod-{i}")))
        .collect();
    try_join_all(pods.iter().map(|(ns, name)| create_pod(&client, ns, name))).await?;
    assert_eq!(
        label_matches_cluster(&client, &cp_node).await?,
        already + 25
    );
    assert_eq!(
        node_label(&client, &worker, COUNT).await?,
        None,
        "worker labelled"
    );
    each_pod_counted_once(&client, &pods).await?;
    // 25 creations and 25 `counted` labels are at least 50 Pod events; the fixed key
    // collapses them, so far fewer full recounts run.
    let recounts = host
        .lines_with(&["reconciled", "plugin=\"pod-counter\""])
        .len();
    eprintln!("pod-counter: {recounts} recounts for the burst of 25 Pods");
    assert!(
        recounts <= 25,
        "{recounts} recounts for at least 50 Pod events"
    );

    for (ns, name) in pods.drain(..5) {
        delete_pod(&client, &ns, &name).await?;
    }
    assert_eq!(
        label_matches_cluster(&client, &cp_node).await?,
        already + 20
    );

    let status = host.terminate()?;
    assert!(status.success(), "host exited with {status} on SIGTERM");
    let late_ns = namespaces[1].name().to_string();
    create_pod(&client, &late_ns, "created-while-stopped").await?;
    pods.push((late_ns, "created-while-stopped".into()));

    let _host = HostProcess::start(dir.path(), &[])?;
    assert_eq!(
        label_matches_cluster(&client, &cp_node).await?,
        already + 21
    );
    each_pod_counted_once(&client, &pods).await?;
    Ok(())
}
