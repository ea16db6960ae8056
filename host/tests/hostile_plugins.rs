//! A broken or hostile plugin never takes the host down. One host runs pod-counter
//! next to `misbehaving`, which traps, loops, exhausts its memory, stack and host
//! handles, makes 100,000 host calls, asks for a list larger than its budget, floods
//! the log and stderr, passes names that would rewrite a request URL, floods Events
//! and requeues itself forever. Each misdeed ends in a clear error naming the plugin
//! and the key (or is cut, dropped and counted), and pod-counter keeps counting
//! within seconds all the while; files that are not components are reported by name.
//! (`misbehaving` watches ConfigMaps in every namespace: one scenario per binary;
//! the crash loop is in `hostile_crash_loop.rs`.)

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::objects::{all_pods, create_misbehaving, create_node, create_pod, node_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir, resources};
use wcm_control_plane::{ControlPlane, TestNamespace};

const WAIT: Duration = Duration::from_secs(90);
/// How long pod-counter may take to count a new Pod while the hostile plugin runs.
const POD_COUNTER_PACE: Duration = Duration::from_secs(10);

/// A core module (not a component): `(module)` in binary form.
const CORE_MODULE: &[u8] = b"\0asm\x01\0\0\0";

fn label_of(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.metadata.labels.as_ref()?.get(key).cloned()
}

/// Waits for `key` on ConfigMap `name` and returns its value; if it never comes, the
/// error shows what the host logged about that ConfigMap.
async fn label_on(
    host: &HostProcess,
    api: &Api<ConfigMap>,
    name: &str,
    key: &str,
) -> Result<String> {
    let found = eventually(WAIT, || async { label_of(&api.get(name).await.ok()?, key) }).await;
    if let Some(value) = found {
        return Ok(value);
    }
    std::fs::write("/tmp/hostile-host.log", host.logs().join("\n")).ok();
    std::fs::write(
        "/tmp/hostile-metrics.txt",
        host.metrics().await.unwrap_or_default(),
    )
    .ok();
    let names: Vec<String> = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let about = host.lines_with(&[&format!("/{name} ")]);
    let last: Vec<_> = about.iter().rev().take(5).collect();
    anyhow::bail!(
        "ConfigMap {name} never got label {key}; the host said: {last:#?}; \
         ConfigMaps in the namespace: {names:?}"
    )
}

#[support::test]
async fn one_host_survives_every_misbehaviour_and_pod_counter_keeps_its_pace() -> Result<()> {
    let ns = TestNamespace::create("hostile").await?;
    let client = ns.client();
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("misbehaving.wasm", plugin_bytes("misbehaving")),
        (
            "random-bytes.wasm",
            (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ),
        ("core-module.wasm", CORE_MODULE.to_vec()),
    ])?;
    let host = HostProcess::start(
        dir.path(),
        &[
            "--reconcile-timeout=5s",
            "--max-memory-mib=32",
            "--max-result-mib=1",
            "--plugin-override=misbehaving:api-qps=10,api-burst=10",
        ],
    )?;
    for (file, cause) in [
        ("random-bytes.wasm", "not a WebAssembly file"),
        (
            "core-module.wasm",
            "core WebAssembly module, not a component",
        ),
    ] {
        host.wait_for_log(&["plugin failed to load", file, cause], WAIT)
            .await?;
    }
    host.wait_for_log(&["plugin loaded", "plugin=misbehaving"], WAIT)
        .await?;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let big = "b".repeat(400 << 10);
    for name in ["big-1", "big-2", "big-3"] {
        create_misbehaving(&cms, name, json!({"behaviour": "ok", "payload": big})).await?;
    }
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "victim"}}))?,
    )
    .await?;
    for behaviour in [
        "trap",
        "loop",
        "grow",
        "recurse",
        "recurse-native",
        "handles",
        "calls",
        "list-all",
        "log-flood",
        "bad-names",
        "events",
        "requeue",
        "long-error",
        "writes",
        "ok",
    ] {
        create_misbehaving(&cms, behaviour, json!({"behaviour": behaviour})).await?;
    }

    pod_counter_keeps_its_pace(&host, &client, ns.name(), ns.labels()).await?;
    failures_name_the_plugin_the_key_and_the_cause(&host, ns.name()).await?;
    host_calls_logs_and_stderr_are_bounded(&host, &cms).await?;
    bad_names_never_reach_the_api_server(&host, &cms).await?;
    an_event_flood_is_filtered(&host, &client, &cms, ns.name()).await?;
    writes_keep_to_the_plugins_api_rate(&host, &cms, ns.name()).await?;
    requeue_forever_is_just_busy(&host).await?;
    let peak = resources(host.pid())?.peak_rss_kib;
    println!("host peak RSS {} MiB", peak >> 10);
    ensure!(
        peak < 1 << 20,
        "the host's memory grew to {} MiB",
        peak >> 10
    );
    Ok(())
}

/// pod-counter counts a Pod created now within [`POD_COUNTER_PACE`].
async fn pod_counter_keeps_its_pace(
    host: &HostProcess,
    client: &kube::Client,
    ns: &str,
    labels: std::collections::BTreeMap<String, String>,
) -> Result<()> {
    // Let the hostile keys get going first: loops, retries and the requeue hog.
    host.wait_for_log(&["reconcile failed", "timed out after 5s"], WAIT)
        .await?;
    let node = format!("{ns}-cp");
    create_node(client, &node, true, labels).await?;
    let created = Instant::now();
    create_pod(client, ns, "still-counted").await?;
    let counted = eventually(WAIT, || async {
        let pods = all_pods(client).await.ok()?;
        let seen = pods
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some("still-counted"));
        let label = node_label(client, &node, "pod-counter.example.com/count")
            .await
            .ok()??;
        (seen && label == pods.len().to_string()).then_some(())
    })
    .await;
    counted.context("pod-counter stopped working next to the hostile plugin")?;
    let took = created.elapsed();
    println!("pod-counter counted a new Pod in {took:?} next to the hostile plugin");
    ensure!(took < POD_COUNTER_PACE, "pod-counter took {took:?}");
    Ok(())
}

async fn failures_name_the_plugin_the_key_and_the_cause(
    host: &HostProcess,
    ns: &str,
) -> Result<()> {
    let key = |name: &str| format!("v1/ConfigMap {ns}/{name}");
    for (name, cause) in [
        ("trap", "deliberate panic in reconcile of trap".to_string()),
        ("loop", "timed out after 5s".into()),
        ("grow", "exceeded its memory limit of 33554432 bytes".into()),
        ("recurse", "out of bounds memory access".into()),
        ("recurse-native", "call stack exhausted".into()),
        (
            "handles",
            "resource table has no free keys (at most 10000 host handles".into(),
        ),
        (
            "list-all",
            format!("more than plugin misbehaving's limit of {}", 1 << 20),
        ),
    ] {
        let key = key(name);
        let needles = ["reconcile failed", "plugin=\"misbehaving\"", &key, &cause];
        host.wait_for_log(&needles, WAIT).await?;
    }
    // Failures are retried with backoff, not dropped.
    let retried = eventually(WAIT, || async {
        let n = host.lines_with(&["reconcile failed", &key("trap")]).len();
        (n >= 3).then_some(n)
    })
    .await;
    ensure!(retried.is_some(), "the trapping key was not retried");
    for cause in ["trap", "timeout", "memory", "handles", "guest_error"] {
        let labels = [("plugin", "misbehaving"), ("cause", cause)];
        let n = host
            .metric("wcm_plugin_call_failures_total", &labels)
            .await?;
        ensure!(
            n >= 1.0,
            "no {cause} counted in wcm_plugin_call_failures_total"
        );
    }
    Ok(())
}

async fn host_calls_logs_and_stderr_are_bounded(
    host: &HostProcess,
    cms: &Api<ConfigMap>,
) -> Result<()> {
    ensure!(label_on(host, cms, "calls", "wcm.test/handled").await? == "true");
    ensure!(label_on(host, cms, "log-flood", "wcm.test/handled").await? == "true");
    ensure!(label_on(host, cms, "ok", "wcm.test/handled").await? == "true");
    let cut = host
        .wait_for_log(&["plugin=\"misbehaving\"", "more bytes cut"], WAIT)
        .await?;
    ensure!(
        cut.len() < 8 << 10,
        "a plugin line of {} bytes reached the log",
        cut.len()
    );
    host.wait_for_log(
        &["plugin log lines dropped", "plugin=\"misbehaving\""],
        WAIT,
    )
    .await?;
    let forged = host
        .logs()
        .iter()
        .filter(|l| l.starts_with("2026-12-03T00:00:00"))
        .count();
    ensure!(forged == 0, "a plugin started a log line of its own");
    host.wait_for_log(
        &["done\\n2026-12-03T00:00:00.000000Z  INFO wcm_daemon: forged"],
        WAIT,
    )
    .await?;
    let longest = host.logs().iter().map(String::len).max().unwrap_or(0);
    ensure!(longest < 16 << 10, "a log line of {longest} bytes");
    let flood = host.lines_with(&["flood line"]).len();
    ensure!(flood < 5_000, "{flood} of 100,000 flood lines were logged");
    let dropped = host
        .metric(
            "wcm_plugin_limit_hits_total",
            &[("plugin", "misbehaving"), ("limit", "log_rate")],
        )
        .await?;
    ensure!(
        dropped >= 90_000.0,
        "only {dropped} log lines counted as dropped"
    );
    Ok(())
}

async fn bad_names_never_reach_the_api_server(
    host: &HostProcess,
    cms: &Api<ConfigMap>,
) -> Result<()> {
    ensure!(label_on(host, cms, "bad-names", "wcm.test/refused").await? == "6");
    ensure!(label_on(host, cms, "bad-names", "wcm.test/not-found").await? == "1");
    let victim = cms.get("victim").await?;
    ensure!(
        label_of(&victim, "wcm.test/spoofed").is_none(),
        "the victim was labelled"
    );
    let audit = ControlPlane::shared()?.audit_log();
    let spoofed = support::audit::writes_by(&audit, "wasm-controller-manager")?
        .into_iter()
        .filter(|w| w.uri.contains("spoofed") || w.uri.contains("victim%2Fstatus"))
        .count();
    ensure!(
        spoofed == 0,
        "{spoofed} requests with a hostile name reached the API server"
    );
    Ok(())
}

async fn an_event_flood_is_filtered(
    host: &HostProcess,
    client: &kube::Client,
    cms: &Api<ConfigMap>,
    ns: &str,
) -> Result<()> {
    ensure!(label_on(host, cms, "events", "wcm.test/event-forbidden").await? == "true");
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let floods: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Flood"))
        .collect();
    ensure!(floods.len() == 1, "{} Flood Events", floods.len());
    let count = floods[0].series.as_ref().map_or(1, |s| s.count);
    ensure!(count <= 25, "the spam filter let {count} Events through");
    let dropped = host
        .metric(
            "wcm_plugin_limit_hits_total",
            &[("plugin", "misbehaving"), ("limit", "events")],
        )
        .await?;
    ensure!(
        dropped >= 1_975.0,
        "only {dropped} Events counted as dropped"
    );
    Ok(())
}

/// 30 label patches in one reconcile at 10 per second (burst 10): the API server
/// receives them over two seconds at least, and the wait is counted.
async fn writes_keep_to_the_plugins_api_rate(
    host: &HostProcess,
    cms: &Api<ConfigMap>,
    ns: &str,
) -> Result<()> {
    ensure!(label_on(host, cms, "writes", "wcm.test/handled").await? == "true");
    let audit = ControlPlane::shared()?.audit_log();
    let patches: Vec<_> = support::audit::writes_by(&audit, "wasm-controller-manager")?
        .into_iter()
        .filter(|w| w.namespace.as_deref() == Some(ns) && w.name.as_deref() == Some("writes"))
        .collect();
    ensure!(patches.len() >= 30, "{} patches of writes", patches.len());
    let first = patches.first().context("no patch")?.received;
    let last = patches.last().context("no patch")?.received;
    let spread = last.duration_since(first);
    ensure!(
        spread >= k8s_openapi::jiff::SignedDuration::from_millis(1900),
        "30 writes at 10 per second reached the API server within {spread:?}"
    );
    let waited = host
        .metric(
            "wcm_plugin_api_wait_seconds_total",
            &[("plugin", "misbehaving")],
        )
        .await?;
    ensure!(
        waited >= 1.5,
        "the plugin's writes waited {waited} s in all"
    );
    Ok(())
}

async fn requeue_forever_is_just_busy(host: &HostProcess) -> Result<()> {
    let many = eventually(WAIT, || async {
        let n = host
            .metric(
                "controller_runtime_reconcile_total",
                &[("controller", "misbehaving"), ("result", "requeue")],
            )
            .await
            .ok()?;
        (n >= 200.0).then_some(n)
    })
    .await;
    ensure!(many.is_some(), "the requeueing key did not keep running");
    Ok(())
}
