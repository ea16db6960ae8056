//! With `--impersonate-plugins`, a plugin's API calls are made as its own
//! ServiceAccount: the audit log names the plugin, not the host, for every write it
//! causes; RBAC decides: with the rule it needs removed, its writes fail as `forbidden`
//! naming the verb and resource, and once the rule is back it works again without a
//! restart. The RBAC comes from `wasm-controller-manager rbac`.

mod support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::audit::writes_by;
use support::objects::{all_pods, create_node, create_pod, events_about, node_label};
use support::rbac::rbac_file;
use support::{HostProcess, eventually, kubectl, plugin_bytes, plugin_file, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};

const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
const CONVERGE: Duration = Duration::from_secs(60);

/// `wasm-controller-manager rbac` for pod-counter with `namespace` and `prefix`,
/// applied for real. Returns the applied file, for [`revoke`].
fn grant(plane: &ControlPlane, namespace: &str, prefix: &str) -> Result<tempfile::NamedTempFile> {
    let plugin = plugin_file("pod-counter");
    let file = rbac_file(&[
        OsStr::new("--namespace"),
        OsStr::new(namespace),
        OsStr::new("--service-account-prefix"),
        OsStr::new(prefix),
        plugin.as_os_str(),
    ])?;
    kubectl(
        plane,
        &[
            OsStr::new("apply"),
            OsStr::new("-f"),
            file.path().as_os_str(),
        ],
    )?;
    Ok(file)
}

/// Deletes what [`grant`] applied (deleting the namespace leaves the ClusterRole and
/// its binding).
fn revoke(plane: &ControlPlane, file: &tempfile::NamedTempFile) {
    let delete = ["delete", "--ignore-not-found", "--wait=false", "-f"].map(OsStr::new);
    let _ = kubectl(plane, &[&delete[..], &[file.path().as_os_str()]].concat());
}

/// Sets the verbs of the ClusterRole `role`'s rule on `nodes`.
async fn node_verbs(client: &kube::Client, role: &str, verbs: &[&str]) -> Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut found = roles.get(role).await?;
    for rule in found.rules.iter_mut().flatten() {
        if rule
            .resources
            .as_ref()
            .is_some_and(|r| r.iter().any(|r| r == "nodes"))
        {
            rule.verbs = verbs.iter().map(|v| v.to_string()).collect();
        }
    }
    found.metadata.managed_fields = None;
    let patch = json!({"rules": found.rules});
    roles
        .patch(role, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_plugin_writes_as_its_service_account_and_rbac_decides() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("imp").await?;
    let prefix = format!("{}-", ns.name());
    let granted = grant(plane, ns.name(), &prefix)?;
    let result = scenario(plane, &ns, &prefix).await;
    revoke(plane, &granted);
    result
}

/// Waits until the Node's count equals the cluster's Pods.
async fn counted(client: &kube::Client, node: &str) -> Option<()> {
    eventually(CONVERGE, || async {
        let pods = all_pods(client).await.ok()?.len();
        (node_label(client, node, COUNT).await.ok()?? == pods.to_string()).then_some(())
    })
    .await
}

async fn scenario(plane: &ControlPlane, ns: &TestNamespace, prefix: &str) -> Result<()> {
    let client = ns.client();
    let role = format!("{prefix}pod-counter");
    let account = format!("system:serviceaccount:{}:{role}", ns.name());
    let node = format!("{}-control-plane", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    create_pod(&client, ns.name(), "first").await?;
    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    let flags = [
        "--impersonate-plugins",
        "--plugin-service-account-namespace",
        ns.name(),
        "--plugin-service-account-prefix",
        prefix,
    ];
    let host = HostProcess::start(dir.path(), &flags)?;
    let done = counted(&client, &node).await;
    done.with_context(|| format!("no count label; log:\n{}", host.logs().join("\n")))?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let marked = eventually(CONVERGE, || async {
        let labels = pods.get("first").await.ok()?.metadata.labels?;
        labels.contains_key(COUNTED).then_some(())
    })
    .await;
    marked.context("the Pod was not marked counted")?;
    let events = events_about(&client, ns.name(), "first", "Counted").await?;
    ensure!(events.len() == 1, "Counted Events: {events:?}");

    // The audit log: every write the host made for the plugin (the Node's label, the
    // Pod's mark, its Events) was made as the plugin's account, none as the host.
    let writes = writes_by(&plane.audit_log(), "wasm-controller-manager")?;
    let mut resources = BTreeSet::new();
    let ours = writes.iter().filter(|w| {
        w.namespace.as_deref() == Some(ns.name()) || w.name.as_deref() == Some(node.as_str())
    });
    for write in ours {
        ensure!(
            write.impersonated.as_deref() == Some(account.as_str()),
            "{write:?}"
        );
        resources.insert(write.resource.clone());
    }
    ensure!(
        resources.contains("nodes") && resources.contains("pods"),
        "{resources:?}"
    );
    ensure!(resources.contains("events"), "{resources:?}");

    // Without the rule, the write is forbidden and the error says who lacks what.
    node_verbs(&client, &role, &["get", "list", "watch"]).await?;
    create_pod(&client, ns.name(), "second").await?;
    let refused = host
        .wait_for_log(&["cannot patch resource", "nodes", "pod-counter"], CONVERGE)
        .await?;
    eprintln!("refused: {refused}");
    ensure!(refused.contains(&account), "{refused}");
    // With the rule back, it counts again, no restart.
    node_verbs(&client, &role, &["get", "list", "patch", "watch"]).await?;
    counted(&client, &node)
        .await
        .context("the count did not recover once the rule was back")
}
