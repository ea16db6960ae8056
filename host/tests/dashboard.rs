//! The Grafana dashboard (`deploy/grafana/wasm-controller-manager.json`) against a
//! running host: the file is a dashboard Grafana loads (panels with Prometheus
//! targets, the plugin variable), and every metric its queries name is one the host
//! exports — scraped from a host on the real control plane with leader election,
//! pod-counter reconciling and a file that is no plugin — with every label the
//! queries group or match by; its instance memory is within the instance's limit.
//! The alerting rules' expressions are held to the same.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use support::docs::repo;
use support::election::{SHORT, flags};
use support::{HostProcess, eventually, http_get, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

/// Labels Prometheus adds to every series it scrapes (`namespace` by the Prometheus
/// Operator's ServiceMonitor).
const SCRAPE_LABELS: [&str; 3] = ["instance", "job", "namespace"];

/// Every `expr` of the dashboard's panels (rows' panels too) and the variable's
/// query.
fn queries(dashboard: &Value) -> Vec<String> {
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.extend(target["expr"].as_str().map(str::to_string));
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The metrics of a PromQL expression (names with `_` not called as a function),
/// each with the labels it must carry: those its own `{...}` matches, and those the
/// expression groups by (`by (...)`), which every metric under them needs.
fn metrics_and_labels(expr: &str) -> BTreeMap<String, BTreeSet<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let names_in = |text: &str| -> BTreeSet<String> {
        let parts = text.split(',');
        let names = parts.map(|p| p.split(['=', '!', '~']).next().unwrap_or("").trim());
        names
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut grouped = BTreeSet::new();
    let mut metrics: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut at = 0;
    while at < expr.len() {
        let rest = &expr[at..];
        let c = rest.chars().next().unwrap_or(' ');
        let after_word = expr[..at].chars().next_back().is_some_and(ident);
        if rest.starts_with("by (") && !after_word {
            let end = rest.find(')').unwrap_or(rest.len());
            grouped.extend(names_in(&rest[4..end]));
            at += end + 1;
        } else if c == '{' {
            let end = rest.find('}').unwrap_or(rest.len());
            if let Some((_, labels)) = metrics.last_mut() {
                labels.extend(names_in(&rest[1..end]));
            }
            at += end + 1;
        } else if (c.is_ascii_alphabetic() || c == '_') && !after_word {
            let len = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
            let word = &rest[..len];
            let called = rest[len..].trim_start().starts_with('(');
            if word.contains('_') && !called {
                metrics.push((word.to_string(), BTreeSet::new()));
            }
            at += len;
        } else {
            at += c.len_utf8();
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, labels) in metrics {
        let entry = out.entry(name).or_default();
        entry.extend(labels);
        entry.extend(grouped.iter().cloned());
    }
    out
}

/// Each sample name of a scrape with the label names its series carry.
fn exported(scrape: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = series.entry(line[..name_end].to_string()).or_default();
        if let Some(inner) = line[name_end..].strip_prefix('{') {
            let inner = &inner[..inner.rfind('}').unwrap_or(inner.len())];
            labels.extend(
                inner
                    .split("\",")
                    .filter_map(|p| Some(p.split_once('=')?.0.trim().to_string())),
            );
        }
    }
    series
}

/// The first query that names a metric not exported, or a label its series lack.
fn gap(queries: &[String], series: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    for expr in queries {
        let metrics = metrics_and_labels(expr);
        if metrics.is_empty() {
            return Some(format!("no metric in {expr}"));
        }
        for (name, labels) in &metrics {
            let Some(carried) = series.get(name) else {
                let known: Vec<&String> = series.keys().collect();
                return Some(format!(
                    "{name} (in {expr}) is not exported; the host exports {known:?}"
                ));
            };
            let scraped = |l: &&String| !SCRAPE_LABELS.contains(&l.as_str());
            if let Some(label) = labels
                .iter()
                .filter(scraped)
                .find(|l| !carried.contains(*l))
            {
                return Some(format!(
                    "{name} has no label {label} (in {expr}): {carried:?}"
                ));
            }
        }
    }
    None
}

#[support::test]
async fn every_query_of_the_dashboard_and_the_alerts_names_metrics_and_labels_the_host_exports()
-> Result<()> {
    let text = std::fs::read_to_string(repo("deploy/grafana/wasm-controller-manager.json"))?;
    let dashboard: Value = serde_json::from_str(&text)?;
    ensure!(dashboard["uid"] == "wasm-controller-manager", "no uid");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .context("no variables")?;
    ensure!(
        variables.iter().any(|v| v["name"] == "plugin"),
        "no plugin variable"
    );
    let mut all = queries(&dashboard);
    ensure!(all.len() >= 20, "{} queries", all.len());
    all.extend(variables.iter().filter_map(|v| {
        let query = v["query"].as_str()?;
        query
            .strip_prefix("label_values(")
            .map(|q| format!("{}{{}}", q.split(',').next().unwrap_or("")))
    }));
    // `up` is Prometheus's own series of each target, not the host's.
    let alerts = crate::alerts::expressions()?;
    all.extend(alerts.into_iter().filter(|e| !e.starts_with("absent(up{")));

    let ns = TestNamespace::create("dashboard").await?;
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("broken.wasm", b"not a component".to_vec()),
    ])?;
    let flags = flags(SHORT, ns.name());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = HostProcess::start(dir.path(), &flags)?;
    let address = host.metrics_address().await?;
    // Series appear as the host works (a plugin's cache once measured, a histogram
    // once observed): scraped until every query is answered, or the last scrape's
    // first gap is the failure.
    let answered = eventually(support::election::CONVERGE, || async {
        let text = http_get(&address, "/metrics").await.ok()?;
        gap(&all, &exported(&text)).is_none().then_some(())
    })
    .await;
    if answered.is_none() {
        let text = http_get(&address, "/metrics").await?;
        anyhow::bail!("{}", gap(&all, &exported(&text)).unwrap_or_default());
    }
    // A file that fails to load has its state, as the alert on it needs.
    let failed = [("plugin", "broken"), ("state", "failed")];
    let state = host.metric("wcm_plugin_state", &failed).await?;
    ensure!(state == 1.0, "wcm_plugin_state of the broken file: {state}");
    // The instance memory is the plugin's, within the default 64 MiB limit.
    let memory = (host.metric(
        "wcm_plugin_instance_memory_bytes",
        &[("plugin", "pod-counter")],
    ))
    .await?;
    ensure!(memory > 0.0 && memory <= f64::from(64u32 << 20), "{memory}");
    drop(host);
    Ok(())
}

#[support::test(offline)]
fn a_query_is_read_into_its_metrics_and_labels() {
    let read = metrics_and_labels(
        "histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{name=~\"$plugin\"}[5m])))",
    );
    let labels: Vec<&String> = read["workqueue_queue_duration_seconds_bucket"]
        .iter()
        .collect();
    assert_eq!(read.len(), 1);
    assert_eq!(labels, ["le", "name"]);
    // Each selector's labels are its own metric's; a grouping's are every metric's.
    let read = metrics_and_labels(
        "sum by (plugin) (rate(wcm_plugin_limit_hits_total{limit=\"events\"}[5m])) / \
         sum by (plugin) (rate(wcm_plugin_api_requests_total[5m]))",
    );
    let hits: Vec<&String> = read["wcm_plugin_limit_hits_total"].iter().collect();
    let requests: Vec<&String> = read["wcm_plugin_api_requests_total"].iter().collect();
    assert_eq!(hits, ["limit", "plugin"]);
    assert_eq!(requests, ["plugin"]);
}
