//! A controller written in Python (`plugins/python/phase-labeller`, built with
//! componentize-py) runs in the host like a Rust one: it registers, watches, reads the
//! cache, patches labels and records Events through the same WIT imports.

mod support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::objects::events_about;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const PHASE: &str = "example.com/phase";
/// Compiling the 18 MB component (CPython inside) takes ~11 s with a debug host.
const CONVERGE: Duration = Duration::from_secs(120);

async fn phase_label(pods: &Api<Pod>, name: &str) -> Option<String> {
    let pod = pods.get(name).await.ok()?;
    pod.metadata.labels?.get(PHASE).cloned()
}

#[tokio::test]
async fn a_python_controller_labels_pods_with_their_phase_and_records_events() -> Result<()> {
    let ns = TestNamespace::create("python").await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "tracked", "labels": {"example.com/track-phase": ""}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let untracked: Pod = serde_json::from_value(json!({
        "metadata": {"name": "untracked"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    pods.create(&PostParams::default(), &untracked).await?;

    let dir = plugins_dir(&[("phase-labeller.wasm", plugin_bytes("phase-labeller"))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    let labelled = eventually(CONVERGE, || async {
        (phase_label(&pods, "tracked").await? == "Pending").then_some(())
    })
    .await;
    labelled.with_context(|| format!("no phase label; log:\n{}", host.logs().join("\n")))?;
    let events = events_about(&ns.client(), ns.name(), "tracked", "PhaseLabelled").await?;
    ensure!(events.len() == 1, "PhaseLabelled Events: {events:?}");
    assert_eq!(
        events[0].reporting_controller.as_deref(),
        Some("phase-labeller")
    );
    assert_eq!(events[0].note.as_deref(), Some("phase Pending"));
    host.wait_for_log(
        &["labelled", "tracked Pending", "plugin=\"phase-labeller\""],
        CONVERGE,
    )
    .await?;

    // A wrong label is corrected; a Pod that did not opt in is left alone.
    let wrong = json!({"metadata": {"labels": {PHASE: "Running"}}});
    pods.patch("tracked", &PatchParams::default(), &Patch::Merge(&wrong))
        .await?;
    let corrected = eventually(CONVERGE, || async {
        (phase_label(&pods, "tracked").await? == "Pending").then_some(())
    })
    .await;
    corrected.context("the wrong label was not corrected")?;
    assert_eq!(phase_label(&pods, "untracked").await, None);
    Ok(())
}
