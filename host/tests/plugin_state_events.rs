//! Events on plugins' states, on the real control plane: a host that knows its Pod
//! (`POD_NAMESPACE`, `POD_NAME`, `POD_UID`, as the downward API gives them in
//! `deploy/`) records Warning Events about that Pod when a plugin file fails to load
//! (`PluginFailed`, naming the file and why) and when a plugin's ServiceAccount lacks
//! a rule it needs (`PluginForbidden`, naming the rule), and a Normal `PluginRunning`
//! once RBAC grants it; `kubectl describe pod` shows them, as it shows a Pod's own.

use crate::support;

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};

const CONVERGE: Duration = Duration::from_secs(60);

/// The Events about the Pod `pod` (by uid) with `reason`.
async fn events_about(ns: &TestNamespace, uid: &str, reason: &str) -> Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(ns.client(), ns.name());
    let events = api.list(&Default::default()).await?;
    Ok((events.items.into_iter())
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .collect())
}

/// Waits for the Event with `reason` about the Pod of `uid`.
async fn event(ns: &TestNamespace, uid: &str, reason: &str) -> Result<Event> {
    let found = eventually(CONVERGE, || async {
        events_about(ns, uid, reason).await.ok()?.into_iter().next()
    })
    .await;
    found.with_context(|| format!("no {reason} Event about the host's Pod"))
}

#[support::test]
async fn a_plugins_turn_for_the_worse_and_its_recovery_are_events_on_the_hosts_pod() -> Result<()> {
    let ns = TestNamespace::create("state-events").await?;
    // The host's Pod, as the object its Events are about: the host runs beside the
    // cluster here, so its Pod is one no node takes (its node selector matches none).
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod = json!({
        "metadata": {"name": "wcm-host"},
        "spec": {
            "nodeSelector": {"wcm.test/no-such-node": "true"},
            "containers": [{"name": "host", "image": "wcm.local/wasm-controller-manager:0.1.0"}],
        },
    });
    let pod = pods
        .create(&PostParams::default(), &serde_json::from_value(pod)?)
        .await?;
    let uid = pod.metadata.uid.context("no uid")?;

    // A file that is no plugin, and pod-counter acting as a ServiceAccount no RBAC
    // grants anything.
    let dir = plugins_dir(&[
        ("broken.wasm", b"not a component".to_vec()),
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
    ])?;
    let cp = ControlPlane::shared()?;
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
    command
        .args(["run", "--plugins-dir"])
        .arg(dir.path())
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args(["--plugin-service-account-namespace", ns.name()])
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .env("POD_NAMESPACE", ns.name())
        .env("POD_NAME", "wcm-host")
        .env("POD_UID", &uid);
    let host = HostProcess::launch(command)?;

    let failed = event(&ns, &uid, "PluginFailed").await?;
    let note = failed.note.clone().unwrap_or_default();
    ensure!(
        failed.type_.as_deref() == Some("Warning") && note.contains("(broken.wasm) is failed:"),
        "{failed:?}"
    );
    ensure!(
        failed.reporting_controller.as_deref() == Some("wasm-controller-manager")
            && failed.reporting_instance.as_deref() == Some("wcm-host"),
        "{failed:?}"
    );
    let forbidden = event(&ns, &uid, "PluginForbidden").await?;
    let note = forbidden.note.clone().unwrap_or_default();
    ensure!(
        note.contains("plugin pod-counter (pod-counter.wasm) is forbidden:")
            && note.contains("list resource \"pods\""),
        "{forbidden:?}"
    );

    // RBAC grants its ServiceAccount: it runs, and says so.
    let bindings: Api<ClusterRoleBinding> = Api::all(ns.client());
    let name = format!("{}-pod-counter", ns.name());
    let binding = json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "wcm-plugin-pod-counter", "namespace": ns.name()}],
    });
    bindings
        .create(&PostParams::default(), &serde_json::from_value(binding)?)
        .await?;
    let running = event(&ns, &uid, "PluginRunning").await;
    bindings.delete(&name, &DeleteParams::default()).await?;
    let running = running?;
    ensure!(running.type_.as_deref() == Some("Normal"), "{running:?}");
    // One Event each: a state seen again is no new Event.
    ensure!(events_about(&ns, &uid, "PluginFailed").await?.len() == 1);

    // As an operator reads them.
    let described = Command::new(ControlPlane::kubectl())
        .args(["describe", "pod", "wcm-host", "-n", ns.name()])
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .output()?;
    let described = String::from_utf8_lossy(&described.stdout);
    for reason in ["PluginFailed", "PluginForbidden", "PluginRunning"] {
        ensure!(described.contains(reason), "no {reason} in:\n{described}");
    }
    drop(host);
    Ok(())
}
