//! What a test prints when Pods on the local node did not get where it waited for them.
//!
//! A timeout alone ("the Pod did not finish within 90 s") says nothing about why; on a
//! shared CI machine the cause may be scheduling, the sandbox, the image or the node
//! itself. [`describe_pods`] gathers what `kubectl describe` would show for a namespace
//! (each Pod's phase, conditions and containers, the namespace's Events), the local
//! node's conditions and taints, and the last lines of the kubelet's and containerd's
//! logs, as one text to put into the test's error.

use std::fmt::Write;
use std::path::Path;

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};

use crate::{ControlPlane, NODE_NAME};

/// Lines of each node log put into a description.
const LOG_LINES: usize = 30;

/// Everything known about the Pods of `namespace` and the node they should run on.
/// Never fails: what could not be read is said in the text.
pub async fn describe_pods(client: &Client, namespace: &str) -> String {
    let mut out = String::new();
    match Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(pods) => pods.items.iter().for_each(|p| describe_pod(&mut out, p)),
        Err(e) => _ = writeln!(out, "Pods of {namespace}: {e}"),
    }
    describe_events(&mut out, client, namespace).await;
    describe_node(&mut out, client).await;
    if let Ok(plane) = ControlPlane::shared() {
        let logs = plane.state_dir().join("logs");
        for name in ["kubelet.log", "containerd.log"] {
            append_tail(&mut out, &logs.join(name));
        }
    }
    out
}

/// One Pod: phase, node, conditions and each container's state.
fn describe_pod(out: &mut String, pod: &Pod) {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let status = pod.status.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    _ = writeln!(
        out,
        "Pod {name}: phase {}, node {}",
        status.phase.as_deref().unwrap_or("?"),
        node.unwrap_or("(not scheduled)")
    );
    for c in status.conditions.iter().flatten() {
        _ = writeln!(
            out,
            "  condition {}={} {} {}",
            c.type_,
            c.status,
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or("")
        );
    }
    let containers = status.init_container_statuses.iter().flatten();
    for c in containers.chain(status.container_statuses.iter().flatten()) {
        _ = writeln!(out, "  container {}: {}", c.name, container_state(c));
    }
}

/// A container's state in one line, as `kubectl get pods` would summarise it.
fn container_state(c: &ContainerStatus) -> String {
    let state = c.state.clone().unwrap_or_default();
    if let Some(w) = state.waiting {
        let reason = w.reason.unwrap_or_default();
        return format!("waiting {reason} {}", w.message.unwrap_or_default());
    }
    if let Some(t) = state.terminated {
        let reason = t.reason.unwrap_or_default();
        return format!("terminated exit {} {reason}", t.exit_code);
    }
    let ready = if c.ready { "ready" } else { "not ready" };
    format!("running, {ready}, {} restarts", c.restart_count)
}

/// The namespace's Events, oldest first.
async fn describe_events(out: &mut String, client: &Client, namespace: &str) {
    let events = Api::<Event>::namespaced(client.clone(), namespace);
    match events.list(&ListParams::default()).await {
        Ok(list) => {
            for e in list.items {
                _ = writeln!(
                    out,
                    "Event {} {} {}/{}: {} (x{})",
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.count.unwrap_or(1)
                );
            }
        }
        Err(e) => _ = writeln!(out, "Events of {namespace}: {e}"),
    }
}

/// The local node's conditions and taints.
async fn describe_node(out: &mut String, client: &Client) {
    let node = match Api::<Node>::all(client.clone()).get(NODE_NAME).await {
        Ok(node) => node,
        Err(e) => {
            _ = writeln!(out, "Node {NODE_NAME}: {e}");
            return;
        }
    };
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    for c in conditions {
        let message = c.message.unwrap_or_default();
        _ = writeln!(out, "Node condition {}={} {message}", c.type_, c.status);
    }
    for t in node.spec.and_then(|s| s.taints).unwrap_or_default() {
        _ = writeln!(out, "Node taint {}:{}", t.key, t.effect);
    }
}

/// The last [`LOG_LINES`] lines of a log file, if it exists.
fn append_tail(out: &mut String, path: &Path) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    _ = writeln!(out, "--- last lines of {}", path.display());
    for line in &lines[lines.len().saturating_sub(LOG_LINES)..] {
        _ = writeln!(out, "{line}");
    }
}
