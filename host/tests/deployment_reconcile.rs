//! deployment-reconcile end to end against the real control plane, with
//! kube-controller-manager's garbage collector and Deployment controller running: a
//! WebApp custom resource becomes an owned Deployment that follows its spec, is
//! repaired when edited or deleted, goes with its owner, and reports status; invalid
//! specs are explained, not retried; a host started before the CRD exists picks the
//! kind up once it is installed.
//!
//! The CRD is cluster-wide and one scenario removes it, so scenarios run one at a time.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::objects::events_about;
use support::webapp::{
    CONVERGE, CRD_NAME, create_webapp, deployment_where, install_crd, ready_condition,
    release_webapps, status_where, webapp_resource, webapps,
};
use support::{HostProcess, eventually, gone, plugin_bytes, plugins_dir};
use tokio::sync::Mutex;
use wcm_control_plane::TestNamespace;

const PLUGIN: &str = "deployment-reconcile";

static SERIAL: Mutex<()> = Mutex::const_new(());

/// Removes the CRD (and every WebApp) and waits until it is gone.
async fn remove_crd(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    release_webapps(client).await?;
    if crds.get_opt(CRD_NAME).await?.is_some() {
        crds.delete(CRD_NAME, &DeleteParams::default()).await?;
    }
    let removed = gone(&crds, CRD_NAME, CONVERGE).await;
    removed.context("the WebApp CRD was not removed")?;
    // Discovery follows the CRD's removal asynchronously: wait until the group
    // version is consistently not served.
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webapp_resource());
    let mut misses = 0;
    let unserved = eventually(CONVERGE, || {
        let api = api.clone();
        async move { api.list(&Default::default()).await.err() }
    });
    unserved.await.context("WebApps still served")?;
    while misses < 5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        misses = match api.list(&Default::default()).await {
            Err(_) => misses + 1,
            Ok(_) => 0,
        };
    }
    Ok(())
}

async fn patch_spec(ns: &TestNamespace, name: &str, spec: Value) -> Result<()> {
    let patch = json!({ "spec": spec });
    webapps(ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Starts a host running deployment-reconcile alone.
fn host() -> Result<(HostProcess, tempfile::TempDir)> {
    host_with(&[])
}

/// Starts a host running deployment-reconcile and the test plugins named in `others`.
fn host_with(others: &[&str]) -> Result<(HostProcess, tempfile::TempDir)> {
    let mut files = vec![(
        "deployment-reconcile.wasm".to_string(),
        plugin_bytes("deployment-reconcile"),
    )];
    files.extend(
        others
            .iter()
            .map(|p| (format!("{p}.wasm"), plugin_bytes(p))),
    );
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(f, b)| (f.as_str(), b.clone())).collect();
    let dir = plugins_dir(&files)?;
    let host = HostProcess::start(dir.path(), &["--missing-kind-retry=500ms"])?;
    Ok((host, dir))
}

fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.as_ref()?.replicas
}

fn image(d: &Deployment) -> Option<&str> {
    let pod = d.spec.as_ref()?.template.spec.as_ref()?;
    pod.containers.first()?.image.as_deref()
}

#[support::test]
async fn a_webapp_becomes_an_owned_deployment_that_follows_its_spec_and_is_repaired() -> Result<()>
{
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp").await?;
    install_crd(&ns.client()).await?;
    let (_host, _dir) = host()?;
    let spec = json!({"image": "nginx:1.27", "replicas": 2, "port": 80,
        "env": [{"name": "MODE", "value": "prod"}]});
    let app = create_webapp(&ns, "shop", spec).await?;

    let d = deployment_where(&ns, "shop", "2 replicas", |d| replicas(d) == Some(2)).await?;
    assert_eq!(image(&d), Some("nginx:1.27"));
    let owner = &d.metadata.owner_references.as_ref().context("no owner")?[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("WebApp", "shop")
    );
    assert_eq!(Some(owner.uid.clone()), app.metadata.uid);
    assert_eq!(owner.controller, Some(true));
    // No kubelet runs, so Pods never become ready: the Deployment controller reports
    // 2 replicas, 0 ready, and the condition says so.
    let status = status_where(&ns, "shop", "2 replicas from the Deployment", |s| {
        s["observedGeneration"] == 1 && s["replicas"] == 2
    })
    .await?;
    let ready = ready_condition(&status).context("no Ready condition")?;
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "Progressing");
    assert_eq!(ready["message"], "0 of 2 replicas ready, 2 updated");
    assert_eq!(ready["observedGeneration"], 1);
    ensure!(ready["lastTransitionTime"].is_string(), "{ready}");

    patch_spec(&ns, "shop", json!({"replicas": 3, "image": "nginx:1.28"})).await?;
    deployment_where(&ns, "shop", "3 replicas of nginx:1.28", |d| {
        replicas(d) == Some(3) && image(d) == Some("nginx:1.28")
    })
    .await?;
    status_where(&ns, "shop", "generation 2", |s| {
        s["observedGeneration"] == 2
    })
    .await?;

    // A hand edit of an owned field is reverted; someone else's label stays.
    let edit = json!({"metadata": {"labels": {"team": "blue"}}, "spec": {"replicas": 7}});
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let by_hand = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    deployments
        .patch("shop", &by_hand, &Patch::Merge(&edit))
        .await?;
    let repaired = deployment_where(&ns, "shop", "replicas back at 3", |d| {
        replicas(d) == Some(3) && d.metadata.generation > Some(2)
    })
    .await?;
    let labels = repaired.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("blue"));

    // A deleted Deployment is recreated.
    let old_uid = repaired.metadata.uid.clone();
    deployments.delete("shop", &DeleteParams::default()).await?;
    deployment_where(&ns, "shop", "a new uid", |d| d.metadata.uid != old_uid).await?;
    Ok(())
}

#[support::test]
async fn a_second_plugin_applying_an_owned_field_without_force_sees_a_conflict() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-pin").await?;
    install_crd(&ns.client()).await?;
    let (host, _dir) = host_with(&["replica-pinner"])?;
    create_webapp(&ns, "pinned", json!({"image": "nginx", "replicas": 2})).await?;
    deployment_where(&ns, "pinned", "2 replicas", |d| replicas(d) == Some(2)).await?;
    // replica-pinner wants 5 replicas on this Deployment, applied without force.
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let pin = json!({"metadata": {"labels": {"wcm.test/pin-replicas": "5"}}});
    deployments
        .patch("pinned", &PatchParams::default(), &Patch::Merge(&pin))
        .await?;
    let seen = eventually(CONVERGE, || async {
        let events = events_about(&ns.client(), ns.name(), "pinned", "ApplyConflict").await;
        events.ok()?.into_iter().next()
    })
    .await
    .with_context(|| {
        format!(
            "replica-pinner saw no conflict; log:\n{}",
            host.logs().join("\n")
        )
    })?;
    let note = seen.note.unwrap_or_default();
    ensure!(
        note.contains("conflict with \"deployment-reconcile\"") && note.contains(".spec.replicas"),
        "{note}"
    );
    assert_eq!(seen.reporting_controller.as_deref(), Some("replica-pinner"));
    // No flip-flop: the owner's value stands.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = deployments.get("pinned").await?;
    assert_eq!(replicas(&d), Some(2));
    Ok(())
}

#[support::test]
async fn deleting_a_webapp_garbage_collects_its_deployment() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-gc").await?;
    install_crd(&ns.client()).await?;
    let (_host, _dir) = host()?;
    create_webapp(&ns, "blog", json!({"image": "nginx", "replicas": 1})).await?;
    deployment_where(&ns, "blog", "1 replica", |d| replicas(d) == Some(1)).await?;
    webapps(&ns)
        .delete("blog", &DeleteParams::background())
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let collected = gone(&deployments, "blog", CONVERGE).await;
    collected.context("the Deployment outlived its WebApp")
}

#[support::test]
async fn an_invalid_webapp_gets_one_warning_and_a_condition_and_no_retry_loop() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-bad").await?;
    install_crd(&ns.client()).await?;
    let (host, _dir) = host()?;
    create_webapp(&ns, "broken", json!({"image": "", "replicas": -1})).await?;
    let status = status_where(&ns, "broken", "an InvalidSpec condition", |s| {
        ready_condition(s).is_some_and(|c| c["reason"] == "InvalidSpec")
    })
    .await?;
    let message = ready_condition(&status).context("condition")?["message"].clone();
    assert_eq!(
        message,
        "invalid spec: spec.image is empty; spec.replicas is -1; it must be 0 or more"
    );
    // Deployments of other namespaces being torn down wake other keys of this host,
    // so count this WebApp's own reconciles, from the host's log.
    let key = format!(
        "{} {}/broken",
        "demo.wasm-controller-manager.io/v1alpha1/WebApp",
        ns.name()
    );
    let reconciles_of = || host.lines_with(&["reconciled", &key]).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = reconciles_of();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = reconciles_of();
    ensure!(
        settled <= 3 && later == settled,
        "{key} reconciled {settled} times, then {later}"
    );
    let failures = host.lines_with(&["reconcile failed", &key]);
    ensure!(
        failures.is_empty(),
        "an invalid spec is not an error to retry: {failures:?}"
    );
    eprintln!("other keys: {:?}", host.lines_with(&["reconcile failed"]));
    let events = events_about(&ns.client(), ns.name(), "broken", "InvalidSpec").await?;
    ensure!(events.len() == 1, "InvalidSpec Events: {events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(events[0].series.as_ref().map(|s| s.count), None, "repeated");
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    ensure!(
        deployments.get_opt("broken").await?.is_none(),
        "applied anyway"
    );

    patch_spec(&ns, "broken", json!({"image": "nginx", "replicas": 1})).await?;
    deployment_where(&ns, "broken", "1 replica", |d| replicas(d) == Some(1)).await?;
    status_where(&ns, "broken", "a Progressing condition", |s| {
        ready_condition(s).is_some_and(|c| c["reason"] == "Progressing")
    })
    .await?;
    Ok(())
}

#[support::test]
async fn a_host_started_before_the_crd_picks_the_kind_up_once_it_is_installed() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-late").await?;
    remove_crd(&ns.client()).await?;
    let (host, _dir) = host()?;
    let line = host
        .wait_for_log(
            &["plugin waits for a kind", "is its CRD installed?"],
            CONVERGE,
        )
        .await?;
    ensure!(
        line.contains("demo.wasm-controller-manager.io/v1alpha1/WebApp")
            && line.contains("deployment-reconcile.wasm"),
        "{line}"
    );
    let rows = wcm_daemon::status::fetch(&host.metrics_address().await?).await?;
    let row = rows.first().context("no plugin row")?;
    assert_eq!(row.state, wcm_daemon::status::State::Waiting);
    assert_eq!(row.plugin.as_deref(), Some(PLUGIN));
    let reason = row.reason.clone().unwrap_or_default();
    ensure!(
        reason.starts_with("waiting for demo.wasm-controller-manager.io/v1alpha1/WebApp"),
        "{reason}"
    );

    install_crd(&ns.client()).await?;
    let address = host.metrics_address().await?;
    let running = eventually(CONVERGE, || async {
        let rows = wcm_daemon::status::fetch(&address).await.ok()?;
        (rows.first()?.state == wcm_daemon::status::State::Running).then_some(())
    })
    .await;
    running.context("the plugin did not start once its CRD was installed")?;
    host.wait_for_log(&["what it waited for", "is there now"], CONVERGE)
        .await?;
    create_webapp(&ns, "late", json!({"image": "nginx", "replicas": 1})).await?;
    deployment_where(&ns, "late", "1 replica", |d| replicas(d) == Some(1)).await?;
    Ok(())
}
