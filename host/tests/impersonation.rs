//! Each plugin acts as its own ServiceAccount, with the RBAC
//! `wasm-controller-manager rbac` generates for the example plugins applied: every
//! example plugin (pod-counter, deployment-reconcile, the Python and the JavaScript
//! one) works as before, and the audit log shows each write under the writing
//! plugin's account, none under the host's. RBAC decides: with pod-counter's `patch`
//! on Nodes removed, its label writes fail as `forbidden` naming the rule, the table
//! shows the rule as not granted and the other plugins are unaffected; once the rule
//! is back, it counts again without a restart.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;
use support::audit::writes_by;
use support::objects::{
    all_pods, create_config_map, create_labelled_pod, create_node, create_pod, events_about,
    label_of, node_label,
};
use support::rbac::{account_flags, apply_rbac, delete_rbac, set_verbs};
use support::webapp::{install_crd, webapp_resource};
use support::{HostProcess, eventually, plugin_bytes, plugin_file, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_daemon::status::State;

const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
const TRACK: &str = "example.com/track-phase";
const PHASE: &str = "example.com/phase";
const CONVERGE: Duration = Duration::from_secs(60);
/// The example plugins: file stem and registered name.
const EXAMPLES: [&str; 4] = [
    "pod-counter",
    "deployment-reconcile",
    "phase-labeller",
    "data-hash",
];

#[support::test]
async fn example_plugins_act_as_their_service_accounts_and_rbac_decides() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("imp").await?;
    install_crd(&ns.client()).await?;
    let prefix = format!("{}-", ns.name());
    let files: Vec<_> = EXAMPLES.iter().map(|p| plugin_file(p)).collect();
    let granted = apply_rbac(plane, ns.name(), &prefix, &files)?;
    let result = scenario(plane, &ns, &prefix).await;
    delete_rbac(plane, &granted);
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

/// Waits until the Pod `name` has the label `key`.
async fn labelled(pods: &Api<Pod>, name: &str, key: &str) -> Result<String> {
    let found = eventually(CONVERGE, || label_of(pods, name, key)).await;
    found.with_context(|| format!("Pod {name} never got {key}"))
}

async fn scenario(plane: &ControlPlane, ns: &TestNamespace, prefix: &str) -> Result<()> {
    let client = ns.client();
    let node = format!("{}-control-plane", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    create_pod(&client, ns.name(), "first").await?;
    create_labelled_pod(&client, ns.name(), "tracked", &[(TRACK, "")]).await?;
    let hashed = [("example.com/hash-data", "")];
    create_config_map(&client, ns.name(), "settings", &hashed).await?;
    let files: Vec<_> = (EXAMPLES.iter())
        .map(|p| (format!("{p}.wasm"), plugin_bytes(p)))
        .collect();
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(f, b)| (f.as_str(), b.clone())).collect();
    let dir = plugins_dir(&files)?;
    let flags = account_flags(ns.name(), prefix, &["--access-review-interval=1s"]);
    let host = HostProcess::start(dir.path(), &flags)?;
    let webapp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.wasm-controller-manager.io/v1alpha1", "kind": "WebApp",
        "metadata": {"name": "shop"},
        "spec": {"image": "nginx:1.27", "replicas": 1, "port": 80},
    }))?;
    let webapps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &webapp_resource());
    webapps.create(&PostParams::default(), &webapp).await?;

    // Every example plugin does its work.
    let done = counted(&client, &node).await;
    done.with_context(|| format!("no count label; log:\n{}", host.logs().join("\n")))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    labelled(&pods, "first", COUNTED).await?;
    let events = events_about(&client, ns.name(), "first", "Counted").await?;
    ensure!(events.len() == 1, "Counted Events: {events:?}");
    ensure!(labelled(&pods, "tracked", PHASE).await? == "Pending");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let made = eventually(CONVERGE, || async { deployments.get("shop").await.ok() }).await;
    made.context("deployment-reconcile made no Deployment")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let hashed = eventually(CONVERGE, || async {
        let labels = config_maps.get("settings").await.ok()?.metadata.labels?;
        labels.get("example.com/data-hash").cloned()
    })
    .await;
    hashed.context("data-hash did not label the ConfigMap")?;
    audit_names_each_plugin(plane, ns, prefix, &node)?;
    for plugin in EXAMPLES {
        let row = host
            .row_in(&format!("{plugin}.wasm"), State::Running, CONVERGE)
            .await?;
        let rights = row.rights.context("no rights in the table")?;
        ensure!(rights.granted == rights.declared, "{plugin}: {rights:?}");
    }
    one_rule_removed(&host, ns, prefix, &node).await
}

/// Every write the host made in the test's namespace or on its Node was made as the
/// ServiceAccount of the plugin that caused it; none as the host itself.
fn audit_names_each_plugin(
    plane: &ControlPlane,
    ns: &TestNamespace,
    prefix: &str,
    node: &str,
) -> Result<()> {
    let writes = writes_by(&plane.audit_log(), "wasm-controller-manager")?;
    let mut by_account: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let ours = writes
        .iter()
        .filter(|w| w.namespace.as_deref() == Some(ns.name()) || w.name.as_deref() == Some(node));
    for write in ours {
        let account = write.impersonated.clone().with_context(|| {
            format!(
                "a write made as the host ({}), not a plugin: {write:?}",
                write.user
            )
        })?;
        by_account
            .entry(account)
            .or_default()
            .insert(write.resource.clone());
    }
    let account = |plugin: &str| format!("system:serviceaccount:{}:{prefix}{plugin}", ns.name());
    let expected = [
        ("pod-counter", "nodes"),
        ("pod-counter", "pods"),
        ("pod-counter", "events"),
        ("deployment-reconcile", "deployments"),
        ("phase-labeller", "pods"),
        ("data-hash", "configmaps"),
    ];
    for (plugin, resource) in expected {
        let wrote = by_account.get(&account(plugin));
        ensure!(
            wrote.is_some_and(|r| r.contains(resource)),
            "no write of {resource} as {plugin}'s account: {by_account:?}"
        );
    }
    let known: BTreeSet<String> = EXAMPLES.iter().map(|p| account(p)).collect();
    ensure!(
        by_account.keys().all(|a| known.contains(a)),
        "{by_account:?}"
    );
    Ok(())
}

/// Without pod-counter's `patch` on Nodes, its label write is forbidden, naming the
/// rule; the table shows it not granted; the Python plugin keeps working; with the
/// rule back, pod-counter counts again, no restart.
async fn one_rule_removed(
    host: &HostProcess,
    ns: &TestNamespace,
    prefix: &str,
    node: &str,
) -> Result<()> {
    let client = ns.client();
    let role = format!("{prefix}pod-counter");
    let account = format!("system:serviceaccount:{}:{role}", ns.name());
    set_verbs(&client, &role, "nodes", &["get", "list", "watch"]).await?;
    create_pod(&client, ns.name(), "second").await?;
    let refused = host
        .wait_for_log(&["cannot patch resource", "nodes", "pod-counter"], CONVERGE)
        .await?;
    ensure!(refused.contains(&account), "{refused}");
    let not_granted = eventually(CONVERGE, || async {
        let rights = host.row("pod-counter.wasm").await.ok()??.rights?;
        let denied = rights.denied.join("; ");
        denied
            .contains("patch resource \"nodes\"")
            .then_some(rights)
    })
    .await;
    let rights = not_granted.context("the table never showed the rule not granted")?;
    ensure!(rights.granted + 1 == rights.declared, "{rights:?}");
    // The other plugins are unaffected.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    create_labelled_pod(&client, ns.name(), "tracked-too", &[(TRACK, "")]).await?;
    ensure!(labelled(&pods, "tracked-too", PHASE).await? == "Pending");
    set_verbs(&client, &role, "nodes", &["get", "list", "patch", "watch"]).await?;
    counted(&client, node)
        .await
        .context("the count did not recover once the rule was back")
}
