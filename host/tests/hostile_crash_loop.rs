//! A plugin whose every reconcile traps is shown `crash-looping` (table, metric, log),
//! its reconciles pause with a growing backoff, and one success ends it.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;
use support::objects::create_misbehaving;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(90);

async fn handled(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .ok()?
        .metadata
        .labels?
        .get("wcm.test/handled")
        .cloned()
}

#[support::test]
async fn a_plugin_whose_every_reconcile_traps_is_crash_looping_until_one_succeeds() -> Result<()> {
    let ns = TestNamespace::create("crashloop").await?;
    let dir = plugins_dir(&[("misbehaving.wasm", plugin_bytes("misbehaving"))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    host.wait_for_log(&["plugin loaded", "plugin=misbehaving"], WAIT)
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..3 {
        create_misbehaving(&cms, &format!("trap-{i}"), json!({"behaviour": "trap"})).await?;
    }
    host.wait_for_log(
        &[
            "plugin crash-looping",
            "plugin=misbehaving",
            "5 reconciles in a row",
        ],
        WAIT,
    )
    .await?;
    let row = eventually(WAIT, || async {
        let rows = wcm_daemon::status::fetch(&host.metrics_address().await.ok()?)
            .await
            .ok()?;
        rows.into_iter().find(|r| r.state == State::CrashLooping)
    })
    .await
    .context("the table never showed crash-looping")?;
    let why = row.reason.unwrap_or_default();
    ensure!(
        why.contains("deliberate panic in reconcile of trap-"),
        "{why}"
    );
    let looping = [("plugin", "misbehaving"), ("state", "crash-looping")];
    ensure!(host.metric("wcm_plugin_state", &looping).await? == 1.0);
    ensure!(
        host.metric(
            "wcm_plugin_consecutive_failures",
            &[("plugin", "misbehaving")]
        )
        .await?
            >= 5.0
    );

    // A key that succeeds ends the loop (after the pause, the next key taken is it).
    for i in 0..3 {
        cms.delete(&format!("trap-{i}"), &Default::default())
            .await?;
    }
    create_misbehaving(&cms, "fine", json!({"behaviour": "ok"})).await?;
    let fine = eventually(WAIT, || handled(&cms, "fine")).await;
    ensure!(
        fine.as_deref() == Some("true"),
        "the succeeding key was not handled"
    );
    host.wait_for_log(
        &[
            "plugin recovered",
            "plugin=\"misbehaving\"",
            "was=\"crash-looping\"",
        ],
        WAIT,
    )
    .await?;
    let running = [("plugin", "misbehaving"), ("state", "running")];
    ensure!(host.metric("wcm_plugin_state", &running).await? == 1.0);
    Ok(())
}
