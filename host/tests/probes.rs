//! What the kubelet's probes and a log pipeline see: `/readyz` answers 503 with the
//! reason until the plugins found at start have loaded and listed, then 200 (a plugin
//! whose watch fails does not hold it back); `/healthz` answers 200; with
//! `--log-format json` every log line is one JSON object; `/metrics` has the series
//! controller-runtime and client-go dashboards read.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use support::{HostProcess, eventually, http_status, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(60);

#[support::test]
async fn readiness_follows_the_first_loads_and_json_logs_are_json() -> Result<()> {
    let _ns = TestNamespace::create("probes").await?;
    // A Python plugin compiles for seconds without the cache: long enough to see the
    // host not ready yet.
    let dir = plugins_dir(&[
        ("phase-labeller.wasm", plugin_bytes("phase-labeller")),
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
    ])?;
    let host = HostProcess::start(dir.path(), &["--no-compile-cache", "--log-format", "json"])?;
    let line = host.wait_for_log(&["serving /metrics"], WAIT).await?;
    let json: serde_json::Value = serde_json::from_str(&line).context("a JSON log line")?;
    let address = json["address"]
        .as_str()
        .context("address field")?
        .to_string();
    let (code, why) = http_status(&address, "/readyz").await?;
    ensure!(code == 503, "ready before the plugins loaded: {code} {why}");
    ensure!(why.contains("loading") || why.contains("listing"), "{why}");
    let ready = eventually(WAIT, || async {
        let (code, _) = http_status(&address, "/readyz").await.ok()?;
        (code == 200).then_some(())
    })
    .await;
    ready.context("never ready")?;
    ensure!(host.lines_with(&["plugin loaded", "phase-labeller"]).len() == 1);
    ensure!(http_status(&address, "/healthz").await?.0 == 200);
    // Dashboards for Go controllers read these names.
    let reconciled = eventually(WAIT, || async {
        let n = host
            .metric(
                "controller_runtime_reconcile_total",
                &[("controller", "pod-counter")],
            )
            .await
            .ok()?;
        (n > 0.0).then_some(())
    })
    .await;
    reconciled.context("no controller_runtime_reconcile_total for pod-counter")?;
    let metrics = host.metrics().await?;
    for series in [
        r#"workqueue_depth{name="pod-counter"}"#,
        r#"workqueue_adds_total{name="pod-counter"}"#,
        r#"workqueue_work_duration_seconds_count{name="pod-counter"}"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="pod-counter"}"#,
        r#"controller_runtime_active_workers{controller="pod-counter"}"#,
        r#"rest_client_requests_total{code="200",method="GET""#,
        r#"wcm_host_calls_total{plugin="pod-counter",function="list",result="ok"}"#,
        r#"wcm_plugin_load_seconds_count{step="compile"} 2"#,
    ] {
        ensure!(metrics.contains(series), "{series} missing");
    }
    for line in host.logs() {
        let value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?;
        ensure!(
            value["level"].is_string() && value["message"].is_string(),
            "{line}"
        );
    }
    Ok(())
}
