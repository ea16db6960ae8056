//! The local node is a real kubelet on containerd: it registers as a Ready
//! control-plane node (labelled and tainted as one), and a Pod that tolerates the
//! taint runs, with an address on the node's bridge, from an image built locally; in a
//! namespace annotated to tolerate it, the example web server serves on its Pod IP.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wcm_control_plane::{ControlPlane, PAUSE_IMAGE, TestNamespace, WEB_IMAGE, poll_until};

/// How long the node and its Pods may take.
const WAIT: Duration = Duration::from_secs(90);

fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn the_node_is_a_ready_control_plane_node_and_runs_a_pod() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let name = plane
        .node()
        .context("the control plane runs without a node: see up.sh's log line `no node: ...`")?;
    let ns = TestNamespace::create("node").await?;
    let nodes: Api<Node> = Api::all(ns.client());
    let node = poll_until(WAIT, || async {
        nodes.get(name).await.ok().filter(is_ready)
    })
    .await
    .context("the node did not become Ready within 90 s")?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    ensure!(
        labels.contains_key("node-role.kubernetes.io/control-plane"),
        "{labels:?}"
    );
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    ensure!(
        taints
            .iter()
            .any(|t| t.key == "node-role.kubernetes.io/control-plane" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    let version = node.status.as_ref().and_then(|s| s.node_info.as_ref());
    let runtime = version
        .map(|v| v.container_runtime_version.clone())
        .unwrap_or_default();
    ensure!(runtime.starts_with("containerd://"), "runtime {runtime}");

    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "runs"},
        "spec": {
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let running = poll_until(WAIT, || async {
        let pod = pods.get("runs").await.ok()?;
        let status = pod.status?;
        (status.phase.as_deref() == Some("Running")).then_some(status)
    })
    .await
    .context("the Pod did not run within 90 s")?;
    let ip = running.pod_ip.unwrap_or_default();
    ensure!(
        ip.starts_with("10.88."),
        "Pod IP {ip:?} is not on the node's bridge"
    );
    ensure!(running.host_ip.is_some(), "no host IP");
    Ok(())
}

#[tokio::test]
async fn a_pod_without_the_toleration_is_not_scheduled_on_the_control_plane_node() -> Result<()> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    let ns = TestNamespace::create("taint").await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stays"},
        "spec": {"containers": [{"name": "app", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let refused = poll_until(WAIT, || async {
        let conditions = pods.get("stays").await.ok()?.status?.conditions?;
        conditions
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.message)
    })
    .await
    .context("the scheduler never said why the Pod stays Pending")?;
    ensure!(refused.contains("untolerated taint"), "{refused}");
    Ok(())
}

#[tokio::test]
async fn in_a_namespace_that_tolerates_the_node_the_web_image_serves() -> Result<()> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    let ns = TestNamespace::create_on_node("web").await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    // No toleration of its own: the namespace's annotation gives it one.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "web", "image": WEB_IMAGE, "imagePullPolicy": "Never",
                "env": [{"name": "PORT", "value": "8081"}, {"name": "MESSAGE", "value": "served"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8081}, "periodSeconds": 1},
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let ip = poll_until(WAIT, || async {
        let status = pods.get("web").await.ok()?.status?;
        let ready = status
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(status.pod_ip?)
    })
    .await
    .context("the web Pod did not become Ready within 90 s")?;
    let answer = get(&format!("{ip}:8081")).await?;
    ensure!(
        answer.contains("200 OK") && answer.contains("served (web)"),
        "{answer}"
    );
    Ok(())
}

/// The whole answer to `GET /` at `addr`.
async fn get(addr: &str) -> Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}
