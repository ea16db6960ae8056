//! deployment-reconcile using contract 0.3's capabilities together, against the real
//! control plane: a WebApp backed by a Secret (read live: Secrets are not watched) is
//! not applied while the Secret is missing, is applied with the Secret as its
//! environment once it exists, and rolls its Pods when the Secret is rotated; the
//! operator's settings name the registry namespace, where a record of the WebApp is
//! kept; a finalizer holds the deleted WebApp until the record is deleted; the
//! plugin's own status writes do not wake it (predicates); its outcomes are counted on
//! `/metrics`.
//!
//! Each scenario runs its own host, which reconciles every WebApp of the cluster, so
//! scenarios run one at a time.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::objects::events_about;
use support::webapp::{
    CONVERGE, create_webapp, deployment_where, install_crd, ready_condition, status_where, webapps,
};
use support::{HostProcess, eventually, gone, plugin_bytes, plugins_dir};
use tokio::sync::Mutex;
use wcm_control_plane::TestNamespace;

static SERIAL: Mutex<()> = Mutex::const_new(());

const PLUGIN: &str = "deployment-reconcile";
const SECRET_VERSION: &str = "demo.wasm-controller-manager.io/secret-version";
const FINALIZER: &str = "demo.wasm-controller-manager.io/registry";

/// The Pod template's annotation naming the Secret's resourceVersion.
fn secret_version(d: &Deployment) -> Option<String> {
    let template = d.spec.as_ref()?.template.metadata.as_ref()?;
    template.annotations.as_ref()?.get(SECRET_VERSION).cloned()
}

fn secret(name: &str, token: &str) -> Result<Secret> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name}, "stringData": {"TOKEN": token},
    }))?)
}

/// A host running deployment-reconcile with settings naming `registry`.
fn host(registry: &str) -> Result<(HostProcess, tempfile::TempDir)> {
    let settings = format!("registryNamespace: {registry}\nsecretRecheckSeconds: 1\n");
    let dir = plugins_dir(&[
        ("deployment-reconcile.wasm", plugin_bytes(PLUGIN)),
        ("deployment-reconcile.settings.yaml", settings.into_bytes()),
    ])?;
    let host = HostProcess::start(dir.path(), &[])?;
    Ok((host, dir))
}

#[support::test]
async fn a_secret_backed_webapp_is_recorded_rolled_on_rotation_and_finalized() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-vault").await?;
    let registry = TestNamespace::create("webapp-registry").await?;
    install_crd(&ns.client()).await?;
    let (host, _dir) = host(registry.name())?;
    create_webapp(
        &ns,
        "vault",
        json!({"image": "vault-ui:2", "secretName": "vault-token"}),
    )
    .await?;

    // No Secret yet: not applied, and said so once.
    let waiting = status_where(&ns, "vault", "SecretMissing", |s| {
        ready_condition(s).is_some_and(|c| c["reason"] == "SecretMissing")
    })
    .await?;
    ensure!(ready_condition(&waiting).is_some_and(|c| c["status"] == "False"));
    let warned = events_about(&ns.client(), ns.name(), "vault", "SecretMissing").await?;
    ensure!(warned.len() == 1, "{} SecretMissing Events", warned.len());
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    ensure!(
        deployments.get_opt("vault").await?.is_none(),
        "applied without its Secret"
    );

    // The Secret appears: the recheck applies the WebApp with it as the environment.
    let secrets: Api<Secret> = Api::namespaced(ns.client(), ns.name());
    let created = secrets
        .create(&PostParams::default(), &secret("vault-token", "one")?)
        .await?;
    let first = created.metadata.resource_version.clone();
    let d = deployment_where(&ns, "vault", "the Secret's version", |d| {
        secret_version(d) == first
    })
    .await?;
    let container = &d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .context("pod")?;
    let from = container.containers[0]
        .env_from
        .clone()
        .context("envFrom")?;
    ensure!(
        from[0]
            .secret_ref
            .as_ref()
            .is_some_and(|s| s.name == "vault-token")
    );

    // Its record in the registry the settings name, and the finalizer that guards it.
    let records: Api<ConfigMap> = Api::namespaced(registry.client(), registry.name());
    let record_name = format!("{}.vault", ns.name());
    let record = eventually(CONVERGE, || async {
        records.get_opt(&record_name).await.ok()?
    })
    .await
    .context("no record in the registry")?;
    let data = record.data.unwrap_or_default();
    ensure!(
        data.get("webapp") == Some(&format!("{}/vault", ns.name())),
        "{data:?}"
    );
    let app = webapps(&ns).get("vault").await?;
    let finalizers = app.metadata.finalizers.unwrap_or_default();
    ensure!(
        finalizers.contains(&FINALIZER.to_string()),
        "{finalizers:?}"
    );

    // A rotated Secret rolls the Pods: the template names the new version.
    let rotated = json!({"stringData": {"TOKEN": "two"}});
    let patched = secrets
        .patch(
            "vault-token",
            &PatchParams::default(),
            &Patch::Merge(&rotated),
        )
        .await?;
    let second = patched.metadata.resource_version.clone();
    ensure!(second != first, "the rotation did not change the Secret");
    deployment_where(&ns, "vault", "the rotated Secret's version", |d| {
        secret_version(d) == second
    })
    .await?;

    // Deleted: the record goes first, then the WebApp.
    webapps(&ns)
        .delete("vault", &DeleteParams::background())
        .await?;
    let gone = eventually(CONVERGE, || async {
        let app = webapps(&ns).get_opt("vault").await.ok()?;
        let record = records.get_opt(&record_name).await.ok()?;
        (app.is_none() && record.is_none()).then_some(())
    })
    .await;
    gone.context("the WebApp or its record outlived the deletion")?;

    let outcome = |o: &'static str| [("plugin", PLUGIN), ("outcome", o)];
    let metric = "wcm_plugin_deployment_reconcile__reconciles_total";
    for counted in ["secret_missing", "applied", "finalized"] {
        let n = host.metric(metric, &outcome(counted)).await?;
        ensure!(n >= 1.0, "{counted}: {n}");
    }
    Ok(())
}

/// Predicates: the plugin's own status write, its finalizer and an annotation do not
/// wake the WebApp's key; a spec change does.
#[support::test]
async fn only_spec_changes_and_deletions_wake_a_webapp() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let ns = TestNamespace::create("webapp-quiet").await?;
    let registry = TestNamespace::create("webapp-registry").await?;
    install_crd(&ns.client()).await?;
    let (host, _dir) = host(registry.name())?;
    create_webapp(&ns, "quiet", json!({"image": "", "replicas": 1})).await?;
    status_where(&ns, "quiet", "InvalidSpec", |s| {
        ready_condition(s).is_some_and(|c| c["reason"] == "InvalidSpec")
    })
    .await?;
    let metric = "wcm_plugin_deployment_reconcile__reconciles_total";
    let invalid = [("plugin", PLUGIN), ("outcome", "invalid")];
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = host.metric(metric, &invalid).await?;
    let note = json!({"metadata": {"annotations": {"note": "not a spec change"}}});
    webapps(&ns)
        .patch("quiet", &PatchParams::default(), &Patch::Merge(&note))
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = host.metric(metric, &invalid).await?;
    ensure!(
        before >= 1.0 && after == before,
        "invalid reconciles {before} then {after}"
    );
    let fixed = json!({"spec": {"image": "nginx:1.27"}});
    webapps(&ns)
        .patch("quiet", &PatchParams::default(), &Patch::Merge(&fixed))
        .await?;
    deployment_where(&ns, "quiet", "the fixed image", |_| true).await?;
    // Deleted while the host runs, so its finalizer is released.
    webapps(&ns)
        .delete("quiet", &DeleteParams::background())
        .await?;
    let released = gone(&webapps(&ns), "quiet", CONVERGE).await;
    released.context("the WebApp was not released")
}
