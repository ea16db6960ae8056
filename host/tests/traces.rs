//! Traces against a real OpenTelemetry Collector (built from pinned modules: the OTLP
//! receiver and the file exporter): a host given `--otlp-endpoint` and a Pod of the
//! test's own to count exports a span per pod-counter reconcile — plugin, key, result,
//! queue wait, a root of its own trace — whose children are the host calls it made
//! (function, kind, API verb, status), within its time; the resource names the service
//! and the replica. The log shows none of the spans.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use support::collector::{Collector, Span};
use support::objects::create_pod;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

/// A reconcile of pod-counter whose children include a label patch that succeeded.
fn reconcile_with_a_write(spans: &[Span]) -> Option<(Span, Vec<Span>)> {
    let reconciles = spans.iter().filter(|s| s.name == "reconcile pod-counter");
    reconciles
        .map(|r| {
            let children: Vec<Span> = (spans.iter())
                .filter(|c| c.parent == r.id && c.trace == r.trace)
                .cloned()
                .collect();
            (r.clone(), children)
        })
        .find(|(_, children)| {
            children
                .iter()
                .any(|c| c.attr("function") == "patch-labels" && c.attr("status") == "ok")
        })
}

#[support::test]
async fn a_reconcile_is_a_span_with_a_child_per_host_call() -> Result<()> {
    let collector = Collector::start()?;
    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    let flags = [
        "--otlp-endpoint",
        &collector.endpoint,
        "--leader-elect-identity",
        "traced-1",
    ];
    let host = HostProcess::start(dir.path(), &flags)?;
    // A Pod of its own, which pod-counter has not counted: its reconcile marks it
    // (a label write) whatever earlier tests left counted.
    let ns = TestNamespace::create("traces").await?;
    create_pod(&ns.client(), ns.name(), "counted-in-a-trace").await?;
    let found = eventually(Duration::from_secs(90), || async {
        reconcile_with_a_write(&collector.spans())
    })
    .await;
    let Some((reconcile, children)) = found else {
        let names: Vec<String> = collector.spans().iter().map(|s| s.name.clone()).collect();
        bail!("no reconcile of pod-counter with a label write among {names:?}");
    };
    ensure!(
        reconcile.parent.is_empty(),
        "a reconcile is a root: {reconcile:?}"
    );
    ensure!(reconcile.attr("plugin") == "pod-counter", "{reconcile:?}");
    ensure!(!reconcile.attr("key").is_empty(), "{reconcile:?}");
    let result = reconcile.attr("result");
    ensure!(
        ["success", "requeue", "requeue_after"].contains(&result),
        "{reconcile:?}"
    );
    let waited: f64 = reconcile.attr("queue_wait_seconds").parse()?;
    ensure!(waited >= 0.0, "{reconcile:?}");
    ensure!(reconcile.resource["service.name"] == "wasm-controller-manager");
    ensure!(reconcile.resource["service.instance.id"] == "traced-1");
    for child in &children {
        ensure!(child.name == child.attr("function"), "{child:?}");
        ensure!(
            !child.attr("verb").is_empty() && !child.attr("status").is_empty(),
            "{child:?}"
        );
        ensure!(
            reconcile.start <= child.start && child.end <= reconcile.end,
            "a host call outside its reconcile: {child:?} in {reconcile:?}"
        );
    }
    let write = (children.iter())
        .find(|c| c.attr("function") == "patch-labels")
        .context("no label write")?;
    ensure!(write.attr("verb") == "patch", "{write:?}");
    ensure!(
        ["v1/Pod", "v1/Node"].contains(&write.attr("kind")),
        "{write:?}"
    );
    let read = children.iter().find(|c| c.attr("verb") == "list");
    ensure!(read.is_some(), "no read among {children:?}");
    // Only the host's own spans are exported, and the log shows none of them.
    let names: Vec<String> = collector.spans().iter().map(|s| s.name.clone()).collect();
    let functions = wcm_core::contract::Capability::ALL.iter().map(|f| f.name());
    let known: Vec<String> = functions.map(str::to_string).collect();
    let foreign = names
        .iter()
        .find(|n| !n.starts_with("reconcile ") && !known.contains(n));
    ensure!(
        foreign.is_none(),
        "a span that is not the host's: {foreign:?}"
    );
    let logs = host.logs();
    let shown = logs
        .iter()
        .find(|l| l.contains("host call") || l.contains("reconcile{"));
    ensure!(shown.is_none(), "the log shows a span: {shown:?}");
    Ok(())
}
