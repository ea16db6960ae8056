//! `deploy/components/every-replica` in the cluster, on the local node:
//! `scripts/deploy.sh --component deploy/components/every-replica` with pod-counter and
//! deployment-reconcile gives three ready host Pods in `--leader-elect-mode=per-plugin`.
//! Each plugin's Lease (`wasm-controller-manager-<plugin>`, labelled with the plugin)
//! is held by a Pod, named by its Pod name, the two plugins by two Pods; both work (the
//! node's Pod count, a WebApp's Deployment); the Pod holding pod-counter deleted, the
//! plugin is taken over by release — well within a lease duration — by another Pod,
//! which reconciles its keys.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use serde_json::json;
use support::deployed::{
    NAMESPACE, deploy, diagnosis, node_count, plane_with_node, ready_pods, undeploy,
};
use support::webapp::{create_webapp, deployment_where, install_crd};
use support::{docs, http_get, plugin_file};
use wcm_control_plane::{TestNamespace, poll_until};

const WAIT: Duration = Duration::from_secs(120);
/// `deploy/`'s Lease duration (the host's default): a hand-over faster than this was a
/// release, not an expiry.
const LEASE_DURATION: Duration = Duration::from_secs(15);

#[support::test]
async fn the_every_replica_component_spreads_the_plugins_over_three_pods() -> Result<()> {
    let (plane, client) = plane_with_node().await?;
    install_crd(&client).await?;
    let overlay = tempfile::tempdir()?;
    let component = docs::repo("deploy/components/every-replica");
    let plugins = [
        plugin_file("pod-counter"),
        plugin_file("deployment-reconcile"),
    ];
    let mut args = vec!["--component", component.to_str().context("path")?];
    args.extend(plugins.iter().filter_map(|p| p.to_str()));
    deploy(plane, overlay.path(), &args)?;
    let result = match scenario(&client).await {
        Err(e) => Err(e.context(diagnosis(&client).await)),
        ok => ok,
    };
    let _ = undeploy(plane, overlay.path());
    result
}

/// Each plugin's Lease holder, by plugin.
async fn holders(client: &Client) -> Result<BTreeMap<String, Lease>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let labelled = ListParams::default().labels("wasm-controller-manager.io/plugin");
    let mut by = BTreeMap::new();
    for lease in api.list(&labelled).await? {
        let labels = lease.metadata.labels.clone().unwrap_or_default();
        by.insert(labels["wasm-controller-manager.io/plugin"].clone(), lease);
    }
    Ok(by)
}

fn holder(lease: &Lease) -> &str {
    let spec = lease.spec.as_ref();
    spec.and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default()
}

/// Waits until both plugins are held by ready host Pods; returns who holds which.
async fn held_by_pods(client: &Client) -> Result<BTreeMap<String, String>> {
    let held = poll_until(WAIT, || async {
        let pods: Vec<String> = (ready_pods(client).await.ok()?.into_iter())
            .filter_map(|p| p.metadata.name)
            .collect();
        let leases = holders(client).await.ok()?;
        let by: BTreeMap<String, String> = (leases.iter())
            .map(|(plugin, lease)| (plugin.clone(), holder(lease).to_string()))
            .collect();
        let all = by.len() == 2 && by.values().all(|h| pods.contains(h));
        all.then_some(by)
    })
    .await;
    held.context("the plugins' Leases were never held by ready host Pods")
}

async fn scenario(client: &Client) -> Result<()> {
    let ready = poll_until(WAIT, || async {
        let pods = ready_pods(client).await.ok()?;
        (pods.len() == 3).then_some(())
    })
    .await;
    ready.context("three host Pods never became ready")?;
    let by = held_by_pods(client).await?;
    ensure!(
        by["pod-counter"] != by["deployment-reconcile"],
        "two plugins over three replicas, one Pod holds both: {by:?}"
    );
    eprintln!("plugins over the Pods: {by:?}");
    poll_until(WAIT, || node_count(client))
        .await
        .context("pod-counter never labelled the node")?;
    let ns = TestNamespace::create("every-replica").await?;
    let spec = json!({"image": "registry.invalid/web:1", "replicas": 0});
    create_webapp(&ns, "shop", spec).await?;
    deployment_where(&ns, "shop", "the WebApp's image", |d| {
        let pod = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        pod.is_some_and(|p| p.containers[0].image.as_deref() == Some("registry.invalid/web:1"))
    })
    .await?;

    // The Pod holding pod-counter goes (a graceful delete): it drains and releases,
    // and another Pod acquires the plugin well before the Lease would expire.
    let leases = holders(client).await?;
    let before = leases["pod-counter"].clone();
    let gone = holder(&before).to_string();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deleted = Instant::now();
    pods.delete(&gone, &DeleteParams::default()).await?;
    let taken = poll_until(WAIT, || async {
        let lease = holders(client).await.ok()?.remove("pod-counter")?;
        let now = holder(&lease).to_string();
        (!now.is_empty() && now != gone).then_some((now, deleted.elapsed()))
    })
    .await;
    let (taker, took) = taken.context("pod-counter was never taken over")?;
    eprintln!("pod-counter moved from {gone} to {taker} {took:?} after the delete");
    ensure!(
        took < LEASE_DURATION,
        "taken after {took:?}: an expiry, not a release"
    );
    // The taker runs it: its informer lists the cluster's Pods, each a key it reconciles.
    let ip = poll_until(WAIT, || async {
        let pod = pods.get(&taker).await.ok()?;
        pod.status?.pod_ip
    })
    .await
    .context("the taker has no Pod IP")?;
    let reconciles = r#"controller_runtime_reconcile_total{controller="pod-counter""#;
    let reconciled = poll_until(WAIT, || async {
        let metrics = http_get(&format!("{ip}:8080"), "/metrics").await.ok()?;
        let value = |l: &str| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok());
        let n: f64 = metrics
            .lines()
            .filter(|l| l.starts_with(reconciles))
            .filter_map(value)
            .sum();
        (n > 0.0).then_some(n)
    })
    .await;
    reconciled.context("the taker never reconciled pod-counter's keys")?;
    Ok(())
}
