//! Cost of one reconcile through the whole path — queue → instance → reconcile with one
//! cached `get` of a ConfigMap, parsed → return — against the same logic as a native
//! Rust closure: the Rust plugin with wasmtime's pooling allocator on (handing memory
//! back, or keeping some of it resident between instances) and off; then the same
//! plugin written in Rust, Go, Python and JavaScript, each in a fresh instance per
//! reconcile (the default) and in one reused instance (the operator's opt-in,
//! `reuse-instance-calls`). Run with `make bench`.
//!
//! Reports medians (and p90) of per-reconcile wall time over many iterations, and the
//! ratio to the native baseline measured in the same process on the same machine.
//! `cargo bench --bench reconcile -- TEXT` runs only the rows whose name holds TEXT
//! (and the native baseline), to profile one of them; `WCM_BENCH_ITERATIONS` sets the
//! rounds per row (3,000).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::json;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use wcm_control_plane::TestNamespace;
use wcm_core::budget::Budget;
use wcm_core::capabilities::{ClusterAccess, Target};
use wcm_core::config::Limits;
use wcm_core::keys::ReconcileKey;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::queue::{Backoff, WorkQueue};
use wcm_core::runtime::{PluginCode, ReusePolicy, ReusedInstance, Runtime};
use wcm_core::traces::{TARGET, TraceExport};

/// A real OpenTelemetry Collector, as the tests of traces start it.
#[path = "../tests/support/collector.rs"]
#[allow(dead_code, reason = "the tests read the spans back")]
mod collector;

/// The plugin's live view of one namespace's ConfigMaps, as the capability tests build it.
#[path = "../tests/support/access.rs"]
#[allow(dead_code, reason = "the tests use the rest")]
mod access;

/// Timed rounds per row; `WCM_BENCH_ITERATIONS` sets another count (more, to profile
/// one row).
fn iterations() -> usize {
    (std::env::var("WCM_BENCH_ITERATIONS").ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(3000)
}
const WARMUP: usize = 200;
/// The same plugin in each language: language, component in `target/test-plugins`.
const LANGUAGES: [(&str, &str); 4] = [
    ("Rust", "bench-get"),
    ("Go", "bench-get-go"),
    ("Python", "bench-get-python"),
    ("JavaScript", "bench-get-javascript"),
];
/// Reuse as an operator would set it: 1,000 calls, and the default growth bound
/// (8 MiB), which retires a Go instance whose garbage (Go's collector is off in a
/// plugin) has piled up; a retired instance is replaced by the next call.
const REUSE: ReusePolicy = ReusePolicy {
    max_calls: 1000,
    max_growth_bytes: 8 << 20,
};

#[tokio::main]
async fn main() -> Result<()> {
    let ns = TestNamespace::create("bench").await?;
    let (access, key) = setup(ns.name(), ns.client()).await?;
    let target = Target {
        gvk: GroupVersionKind::gvk("", "v1", "ConfigMap"),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    };
    let native = measure(&key, |k| {
        let access = access.clone();
        let target = target.clone();
        async move {
            let json = (access.get(&target).await).map_err(|e| anyhow::anyhow!("{e}"))?;
            let _cm: ConfigMap = serde_json::from_str(&json)?;
            let _ = k;
            Ok(())
        }
    })
    .await?;
    report("native closure", &native, None);
    let variants = [
        ("wasm, pooling allocator", true, 0, false),
        ("wasm, pooling, 64 KiB kept resident", true, 64 << 10, false),
        ("wasm, pooling, 1 MiB kept resident", true, 1 << 20, false),
        (
            "wasm, pooling, pagemap scan, 128 KiB",
            true,
            128 << 10,
            true,
        ),
        (
            "wasm, pooling, pagemap scan, 256 KiB",
            true,
            256 << 10,
            true,
        ),
        ("wasm, pooling, pagemap scan, 1 MiB", true, 1 << 20, true),
        ("wasm, pooling, pagemap scan, 8 MiB", true, 8 << 20, true),
        ("wasm, on-demand allocator", false, 0, false),
    ];
    for (name, pooling, keep_resident, pagemap_scan) in variants {
        if !wanted(name) {
            continue;
        }
        let limits = Limits {
            pooling,
            pool_keep_resident_bytes: keep_resident,
            pool_pagemap_scan: pagemap_scan,
            ..Limits::default()
        };
        let code = load(limits, "bench-get").await?;
        let wasm = measure(&key, |k| reconcile_fresh(&code, &access, k)).await?;
        report(name, &wasm, Some(&native));
    }
    println!("the same reconcile by language, fresh instance vs one reused instance:");
    for (language, plugin) in LANGUAGES {
        let rows = ["fresh", "reused"].map(|i| wanted(&format!("{language}, {i} instance")));
        if rows == [false, false] {
            continue;
        }
        let code = load(Limits::default(), plugin).await?;
        let name = format!("{language}, fresh instance");
        if wanted(&name) {
            let fresh = measure(&key, |k| reconcile_fresh(&code, &access, k)).await?;
            report(&name, &fresh, Some(&native));
        }
        let name = format!("{language}, reused instance");
        if !wanted(&name) {
            continue;
        }
        let slot = Arc::new(tokio::sync::Mutex::new(Reuse::default()));
        let reused = measure(&key, |k| reconcile_in(&code, &access, slot.clone(), k)).await?;
        let retired = slot.lock().await.retired;
        report(&name, &reused, Some(&native));
        println!(
            "{:40} {retired} instances retired in {} reconciles",
            "",
            WARMUP + iterations()
        );
    }
    match wanted("traces") {
        true => traced(&access, &key).await,
        false => Ok(()),
    }
}

/// Whether the row `name` runs: every row, unless the command line names some.
fn wanted(name: &str) -> bool {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    filter.is_none_or(|f| name.contains(&f))
}

/// The Rust plugin's reconcile with traces exported to a real collector
/// (`--otlp-endpoint`: a span for the reconcile, one for its `get`) against the same
/// with none, in alternating rounds.
async fn traced(access: &Arc<ClusterAccess>, key: &ReconcileKey) -> Result<()> {
    let collector = collector::Collector::start()?;
    let export = TraceExport::start(&collector.endpoint, "bench")?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(export.layer()));
    let code = load(Limits::default(), "bench-get").await?;
    println!("the Rust plugin with traces exported to a collector against none:");
    for reuse in [false, true] {
        let slot = Arc::new(tokio::sync::Mutex::new(Reuse::default()));
        let code = &code;
        let once = |k: ReconcileKey| {
            let span = tracing::info_span!(target: TARGET, "reconcile", key = %k);
            let slot = slot.clone();
            async move {
                match reuse {
                    true => reconcile_in(code, access, slot, k).await,
                    false => reconcile_fresh(code, access, k).await,
                }
            }
            .instrument(span)
        };
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _round in 0..3 {
            // Traced first: with one dispatcher in the process, a span's call site is
            // judged by the dispatcher in scope when it is first reached, and one
            // first reached untraced would stay disabled (the host has one global
            // dispatcher, the exporter's layer in it from the start).
            {
                let _traced = tracing::dispatcher::set_default(&dispatch);
                on.extend(measure(key, once).await?);
            }
            off.extend(measure(key, once).await?);
        }
        off.sort();
        on.sort();
        let instance = if reuse { "reused" } else { "fresh" };
        report_against(&format!("{instance} instance, no traces"), &off, None);
        report_against(
            &format!("{instance} instance, traced"),
            &on,
            Some((&off, "untraced")),
        );
    }
    export.shutdown();
    // The collector writes its file every 100 ms.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let exported = collector.spans().len();
    println!("{:40} {exported} spans reached the collector", "");
    Ok(())
}

/// One reconcile in a fresh instance (the default).
async fn reconcile_fresh(
    code: &PluginCode,
    access: &Arc<ClusterAccess>,
    key: ReconcileKey,
) -> Result<()> {
    let result = ReusedInstance::reconcile_once(code, access.clone(), &key).await;
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// The instance one worker keeps, and how many it replaced.
#[derive(Default)]
struct Reuse {
    instance: Option<ReusedInstance>,
    retired: usize,
}

/// One reconcile in the kept instance, made anew as the worker would make it.
async fn reconcile_in(
    code: &PluginCode,
    access: &Arc<ClusterAccess>,
    slot: Arc<tokio::sync::Mutex<Reuse>>,
    key: ReconcileKey,
) -> Result<()> {
    let mut slot = slot.lock().await;
    let mut instance =
        (slot.instance.take()).unwrap_or_else(|| ReusedInstance::new(code, access.clone(), REUSE));
    let (result, retired) = instance.reconcile(&key).await;
    match retired {
        Some(_) => slot.retired += 1,
        None => slot.instance = Some(instance),
    }
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

async fn setup(ns: &str, client: Client) -> Result<(Arc<ClusterAccess>, ReconcileKey)> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "target", "labels": {"wcm.bench/target": ""}},
        "data": {"payload": "x".repeat(4096)},
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await?;
    let (leader, budget) = (LeaderGate::always_open(), Budget::default());
    let (access, _) = access::config_map_access(
        "bench-get",
        ns,
        client,
        (leader, budget),
        Default::default(),
    )
    .await?;
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let key = ReconcileKey {
        kind: Some(gvk),
        namespace: Some(ns.into()),
        name: "target".into(),
    };
    Ok((Arc::new(access), key))
}

async fn load(limits: Limits, plugin: &str) -> Result<PluginCode> {
    let runtime = Arc::new(Runtime::new(limits, None).map_err(|e| anyhow::anyhow!("{e}"))?);
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/test-plugins/{plugin}.wasm"));
    let loaded = runtime
        .load(&file)
        .await
        .with_context(|| format!("{} (run `make plugins`)", file.display()))?;
    Ok(loaded.code)
}

/// Times [`iterations`] rounds of add → next → reconcile → done on one queue.
async fn measure<F, Fut>(key: &ReconcileKey, reconcile: F) -> Result<Vec<Duration>>
where
    F: Fn(ReconcileKey) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let queue = WorkQueue::new(Backoff::default());
    let iterations = iterations();
    let mut times = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let start = Instant::now();
        queue.add(key.clone());
        let k = queue.next().await.context("queue closed")?;
        reconcile(k.clone()).await?;
        queue.forget(&k);
        queue.done(&k);
        if i >= WARMUP {
            times.push(start.elapsed());
        }
    }
    times.sort();
    Ok(times)
}

fn report(name: &str, sorted: &[Duration], native: Option<&[Duration]>) {
    report_against(name, sorted, native.map(|n| (n, "native")));
}

/// Prints the median and p90 of `sorted`, and the ratio of medians to a baseline.
fn report_against(name: &str, sorted: &[Duration], baseline: Option<(&[Duration], &str)>) {
    let at = |q: f64, v: &[Duration]| v[((v.len() - 1) as f64 * q) as usize];
    let median = at(0.5, sorted);
    let ratio = baseline.map(|(b, what)| {
        let r = median.as_secs_f64() / at(0.5, b).as_secs_f64();
        format!("   {r:.2}× {what}")
    });
    println!(
        "{name:40} median {:>9.1} µs   p90 {:>9.1} µs{}",
        median.as_secs_f64() * 1e6,
        at(0.9, sorted).as_secs_f64() * 1e6,
        ratio.unwrap_or_default()
    );
}
