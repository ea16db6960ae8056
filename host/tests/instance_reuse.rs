//! Instance reuse, the operator's opt-in (`--plugin-override NAME:reuse-instance-calls=N`),
//! against the real API server: by default every reconcile runs in a fresh instance;
//! opted in, one worker's instance serves N reconciles, and is replaced at once after
//! a trap or once its memory has grown past the bound, each retirement counted in
//! `wcm_plugin_instance_recycles_total{plugin,reason}`.
//!
//! The plugin (`misbehaving`, behaviour `instance-calls`) appends the number of calls
//! its instance has served to a label on every reconcile, and its own write wakes it
//! again, so the label is the instance's history: `1.2.3.1.2.3` is an instance
//! replaced after its third call. One worker (`--max-concurrent-reconciles 1`), so
//! the history is one instance's at a time.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};
use support::objects::create_misbehaving;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(90);
/// The history `instance-calls` writes before it stops.
const ENTRIES: usize = 6;

/// Runs the plugin in a host with `flags`, lets it write the history of a ConfigMap
/// with `data`, and returns that history and the host (for its metrics).
async fn history(
    ns: &TestNamespace,
    name: &str,
    data: Value,
    flags: &[&str],
) -> Result<(String, HostProcess)> {
    let dir = plugins_dir(&[("misbehaving.wasm", plugin_bytes("misbehaving"))])?;
    let mut all = vec!["--max-concurrent-reconciles", "1"];
    all.extend_from_slice(flags);
    let host = HostProcess::start(dir.path(), &all)?;
    host.wait_for_log(&["plugin loaded", "plugin=misbehaving"], WAIT)
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut data = data;
    data["behaviour"] = json!("instance-calls");
    create_misbehaving(&cms, name, data).await?;
    let history = eventually(WAIT, || async {
        let cm = cms.get(name).await.ok()?;
        let history = cm.metadata.labels?.get("wcm.test/history").cloned()?;
        (history.split('.').count() >= ENTRIES).then_some(history)
    })
    .await;
    let last = cms.get(name).await?.metadata.labels.unwrap_or_default();
    let history = history.with_context(|| {
        format!("{name}: the history never reached {ENTRIES} entries: {last:?}")
    })?;
    Ok((history, host))
}

/// The host's recycle counters, for a failure's message.
async fn all_recycles(host: &HostProcess) -> String {
    let text = host.metrics().await.unwrap_or_default();
    let lines = text
        .lines()
        .filter(|l| l.starts_with("wcm_plugin_instance_recycles"));
    lines.collect::<Vec<_>>().join("\n")
}

async fn recycles(host: &HostProcess, reason: &str) -> Result<f64> {
    let labels = [("plugin", "misbehaving"), ("reason", reason)];
    host.metric("wcm_plugin_instance_recycles_total", &labels)
        .await
}

/// The calls each reconcile found its instance had served, in order.
fn calls(history: &str) -> Vec<u32> {
    history.split('.').filter_map(|c| c.parse().ok()).collect()
}

/// One reuse scenario in a host of its own: the history shows an instance serving a
/// second call, none serving more than `most`, and instances retired for `reason`
/// and never for any of `never`.
async fn reused_at_most(
    ns: &TestNamespace,
    (name, data): (&str, Value),
    flags: &[&str],
    (most, what): (u32, &str),
    (reason, never): (&str, &[&str]),
) -> Result<()> {
    let (history, mut host) = history(ns, name, data, flags).await?;
    let seen = calls(&history);
    let why = format!("{history}; {}", all_recycles(&host).await);
    ensure!(seen.contains(&2), "instances are reused: {why}");
    ensure!(seen.iter().all(|&c| c <= most), "{what}: {why}");
    ensure!(recycles(&host, reason).await? >= 1.0, "{why}");
    for other in never {
        ensure!(recycles(&host, other).await? == 0.0, "{why}");
    }
    host.stop()?;
    Ok(())
}

/// The scenarios share the plugin's cluster-wide watch, so they run one host at a
/// time; a finished ConfigMap is left alone by the next host. A reconcile can run more
/// often than the plugin's own writes (a written copy and its watch event both wake
/// it, and a read of the older copy loses an entry), so the checks are on the bounds
/// each history keeps, not on one exact sequence.
#[support::test]
async fn instances_are_reused_only_as_the_operator_allows_and_replaced_when_they_fail_or_grow()
-> Result<()> {
    let ns = TestNamespace::create("instance-reuse").await?;

    let (fresh, mut host) = history(&ns, "fresh", json!({}), &[]).await?;
    ensure!(
        calls(&fresh).iter().all(|&c| c == 1),
        "by default each reconcile is a fresh instance: {fresh}"
    );
    ensure!(recycles(&host, "calls").await? == 0.0);
    host.stop()?;

    let reuse3 = ["--plugin-override", "misbehaving:reuse-instance-calls=3"];
    let limit = (3, "three calls per instance");
    reused_at_most(&ns, ("reused", json!({})), &reuse3, limit, ("calls", &[])).await?;

    let reuse100 = ["--plugin-override", "misbehaving:reuse-instance-calls=100"];
    let trap3 = ("trapped", json!({"trap-at": "3"}));
    let limit = (2, "a trap replaces the instance");
    reused_at_most(&ns, trap3, &reuse100, limit, ("failure", &["calls"])).await?;

    // 600 KiB leaked per call; the bound is 1 MiB past the first call's memory, so the
    // third call's growth (1.2 MiB) retires the instance.
    let growth = [
        "--plugin-override",
        "misbehaving:reuse-instance-calls=100,reuse-instance-growth-mib=1",
    ];
    let leak = ("leaky", json!({"leak-kib": "600"}));
    let limit = (3, "memory growth replaces the instance");
    reused_at_most(&ns, leak, &growth, limit, ("memory", &["calls"])).await
}
