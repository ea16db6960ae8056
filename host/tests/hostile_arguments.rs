//! Every host import called with an argument of tens of MiB, of every shape — a name,
//! a kind, a label selector, label keys and a million labels, a finalizer, an Event's
//! reason and note, JSON bodies shaped to cost the most to parse, a patch, a status, a
//! delete precondition, a metric's name and value, a log message of control
//! characters — is refused as `invalid` naming the bound (or cut, for the log), and the
//! host's peak resident memory grows by a small multiple of what the plugin passed,
//! not by the tens of bytes per element a parse into a tree would cost.

mod support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir, resources};
use wcm_control_plane::TestNamespace;
use wcm_host::status::State;

const WAIT: Duration = Duration::from_secs(120);
/// The size of each hostile argument.
const MIB: usize = 48;

/// Each call, what it must answer (`invalid 1`: invalid, naming the size bound).
const EXPECTED: [(&str, &str); 18] = [
    ("get-name", "invalid"),
    ("get-group", "invalid"),
    ("list", "invalid 1"),
    ("count", "invalid 1"),
    ("label-key", "invalid"),
    ("labels-many", "invalid 1"),
    ("finalizer", "invalid 1"),
    ("event-reason", "invalid"),
    ("event-note", "invalid"),
    ("apply-array", "invalid 1"),
    ("create-object", "invalid 1"),
    ("update-nested", "invalid 1"),
    ("patch", "invalid 1"),
    ("patch-status", "invalid 1"),
    ("delete", "invalid 1"),
    ("metric-name", "invalid"),
    ("metric-value", "invalid"),
    ("log", "ok"),
];

/// Sets `pid`'s peak resident memory back to what it holds now; returns that.
fn reset_peak(pid: u32) -> Result<usize> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    Ok(resources(pid)?.peak_rss_kib)
}

#[tokio::test]
async fn huge_arguments_are_refused_before_they_cost_the_host_more_than_their_size() -> Result<()> {
    let ns = TestNamespace::create("hostile-args").await?;
    let dir = plugins_dir(&[("hostile-arguments.wasm", plugin_bytes("hostile-arguments"))])?;
    // Room in the guest for the arguments it builds.
    let host = HostProcess::start(dir.path(), &["--max-memory-mib", "512"])?;
    host.row_in("hostile-arguments.wasm", State::Running, WAIT)
        .await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for (call, expected) in EXPECTED {
        let before = reset_peak(host.pid())?;
        let answer = one_call(&api, &host, call).await?;
        let grown_mib = resources(host.pid())?.peak_rss_kib.saturating_sub(before) >> 10;
        ensure!(answer == format!("{call}={expected}"), "{call}: {answer}");
        // The guest's arguments (and its copies of them) are resident memory of the
        // host's too; the host's one copy of each argument adds as much again.
        ensure!(
            grown_mib <= 4 * MIB,
            "{call}: the host's peak grew by {grown_mib} MiB for an argument of {MIB} MiB"
        );
    }
    // The log line was cut before it was escaped.
    let line = host
        .wait_for_log(&["hostile-arguments", "more bytes cut"], WAIT)
        .await?;
    ensure!(line.len() < 16 << 10, "a log line of {} bytes", line.len());
    Ok(())
}

/// Has the plugin make `call` with arguments of [`MIB`] MiB; returns its answer.
async fn one_call(api: &Api<ConfigMap>, host: &HostProcess, call: &str) -> Result<String> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": call, "labels": {"wcm.test/hostile-arguments": ""}},
        "data": {"mib": MIB.to_string(), "only": call},
    }))?;
    api.create(&PostParams::default(), &cm).await?;
    let answer = eventually(WAIT, || async {
        let cm = api.get(call).await.ok()?;
        cm.metadata.labels?.get("wcm.test/done")?;
        cm.data?.get("results").cloned()
    })
    .await;
    answer.with_context(|| format!("{call}: no answer; log:\n{}", host.logs().join("\n")))
}
