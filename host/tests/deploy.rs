//! The host as users run it: `scripts/deploy.sh` (what `make deploy` runs: the image
//! imported into the local node, `deploy/` with pod-counter in a ConfigMap, applied
//! with kubectl) gives two ready host Pods, one holding the Lease; pod-counter labels
//! the real node with the cluster's Pod count (the host's own Pods included); a new
//! plugin version in the ConfigMap is hot-loaded without a restart; the leader's
//! `/metrics` is scraped on its Pod IP; and when the leading Pod is deleted, the other
//! replica takes over and keeps reconciling.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use support::{http_get, plugin_bytes, plugin_file};
use wcm_control_plane::{ControlPlane, NODE_NAME, poll_until};

const NAMESPACE: &str = "wcm-system";
const WAIT: Duration = Duration::from_secs(120);
const COUNT: &str = "pod-counter.example.com/count";

fn deploy(plane: &ControlPlane, overlay: &Path) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let kubeconfig = plane.admin_kubeconfig();
    let out = Command::new("bash")
        .arg(root.join("scripts/deploy.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_wasm-controller-manager")])
        .arg("--overlay")
        .arg(overlay)
        .arg(plugin_file("pod-counter"))
        .env("KUBECONFIG", kubeconfig)
        .env("WCM_CLUSTER_DIR", kubeconfig.parent().context("state dir")?)
        .output()?;
    ensure!(
        out.status.success(),
        "deploy.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

async fn ready_pods(client: &Client) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let listed = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=wasm-controller-manager"))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                && p.metadata.deletion_timestamp.is_none()
        })
        .collect())
}

/// The Pod holding the Lease, once it is one of `pods`.
async fn leader(client: &Client, pods: &[Pod]) -> Option<Pod> {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get("wasm-controller-manager")
        .await
        .ok()?;
    let holder = lease.spec?.holder_identity?;
    pods.iter()
        .find(|p| {
            p.metadata
                .name
                .as_ref()
                .is_some_and(|n| holder.starts_with(&format!("{n}_")))
        })
        .cloned()
}

/// The Lease and the last log lines of every host Pod, for a failure message.
async fn diagnosis(client: &Client) -> Result<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get("wasm-controller-manager")
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut said = vec![format!("lease {:?}", lease.spec)];
    for pod in pods.list(&ListParams::default()).await?.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let logs = pods
            .logs(&name, &Default::default())
            .await
            .unwrap_or_default();
        let tail: Vec<&str> = logs.lines().rev().take(8).collect();
        let phase = pod.status.and_then(|s| s.phase);
        said.push(format!("{name} ({phase:?}): {tail:#?}"));
    }
    Ok(said.join("\n"))
}

async fn node_count(client: &Client) -> Option<String> {
    let node = Api::<Node>::all(client.clone()).get(NODE_NAME).await.ok()?;
    node.metadata.labels?.get(COUNT).cloned()
}

#[tokio::test]
async fn deployed_replicas_elect_a_leader_count_pods_hot_load_and_fail_over() -> Result<()> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    let client = plane.admin_client().await?;
    // pod-counter marks every Pod of the cluster at its API rate (20/s): let earlier
    // tests' Pods go first, so this scenario is about the deployment, not a backlog.
    let all: Api<Pod> = Api::all(client.clone());
    let quiet = poll_until(WAIT, || async {
        let pods = all.list(&ListParams::default()).await.ok()?.items.len();
        (pods < 100).then_some(())
    })
    .await;
    quiet.context("earlier tests' Pods are still there")?;
    let overlay = tempfile::tempdir()?;
    deploy(plane, overlay.path())?;
    let result = scenario(&client).await;
    let _ = Command::new(ControlPlane::kubectl())
        .args(["delete", "--ignore-not-found", "--wait=false", "-k"])
        .arg(overlay.path())
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .output();
    result
}

async fn scenario(client: &Client) -> Result<()> {
    let pods = ready_pods(client).await?;
    ensure!(pods.len() == 2, "{} ready host Pods", pods.len());
    let first = poll_until(WAIT, || leader(client, &pods))
        .await
        .context("no leader")?;

    // pod-counter, in the cluster, counts every Pod, its own host's included.
    let all: Api<Pod> = Api::all(client.clone());
    let counted = poll_until(WAIT, || async {
        let total = all.list(&ListParams::default()).await.ok()?.items.len();
        (node_count(client).await? == total.to_string()).then_some(total)
    })
    .await
    .context("the node's count never matched the cluster's Pods")?;
    ensure!(counted >= 2);

    let ip = first
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("no Pod IP")?;
    let metrics = http_get(&format!("{ip}:8080"), "/metrics").await?;
    ensure!(
        metrics.contains(r#"controller_runtime_reconcile_total{controller="pod-counter""#),
        "the leader's metrics have no reconciles"
    );
    ensure!(metrics.contains(r#"leader_election_master_status{name="wasm-controller-manager"} 1"#));

    // A new version in the ConfigMap: hot-loaded by the running Pods.
    let next = ByteString(plugin_bytes("pod-counter-next"));
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wcm-plugin-pod-counter", "namespace": NAMESPACE},
        "binaryData": {"pod-counter.wasm": next},
    }))?;
    let params = PatchParams::apply("deploy-test").force();
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .patch("wcm-plugin-pod-counter", &params, &Patch::Apply(&cm))
        .await?;
    let upgraded = poll_until(WAIT, || async {
        node_count(client).await.filter(|c| c.ends_with("-pods"))
    })
    .await;
    upgraded.context("the new plugin version in the ConfigMap was not loaded")?;
    let after = ready_pods(client).await?;
    let restarts: i32 = after
        .iter()
        .flat_map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default()
        })
        .map(|c| c.restart_count)
        .sum();
    ensure!(
        after.len() == 2 && restarts == 0,
        "hot-load restarted Pods: {restarts}"
    );

    // The leading Pod goes: the other replica takes over and keeps counting.
    let name = first.metadata.name.clone().context("name")?;
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .delete(&name, &DeleteParams::default())
        .await?;
    let took_over = poll_until(WAIT, || async {
        let replicas = ready_pods(client).await.ok()?;
        let new = leader(client, &replicas).await?;
        (new.metadata.name.as_deref() != Some(name.as_str())).then_some(new)
    })
    .await;
    if took_over.is_none() {
        bail!("no other replica took over: {}", diagnosis(client).await?);
    }
    let recounted = poll_until(WAIT, || async {
        let total = all.list(&ListParams::default()).await.ok()?.items.len();
        let label = node_count(client).await?;
        (label == format!("{total}-pods")).then_some(())
    })
    .await;
    recounted.context("the new leader did not keep the count")?;
    Ok(())
}
