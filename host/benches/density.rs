//! Many controllers at once: one host running N plugins against N controller-runtime
//! processes doing the same work (each counts the cluster's Pods, as pod-counter), for
//! N = 1, 10 and 50: resident memory once synced and after a burst of Pods, CPU over
//! the burst, and memory per additional controller. A third set is one host with a
//! mix of N plugins — copies of pod-counter and deployment-reconcile, each under its
//! own name (settings `name`), plus phase-labeller (Python) and data-hash
//! (JavaScript) — for what each kind of plugin adds.
//!
//! `make bench` builds the controller-runtime peer and starts the control plane.
//! `WCM_DENSITY_SIZES` (default `1,10,50`) and `WCM_DENSITY_BURST` (default 500)
//! choose the work. The pod-counter copies and processes all keep the same count
//! label and mark the same Pods: the first to mark a Pod records its Event, as N
//! replicas of one controller without leader election would. The host acts as its
//! ServiceAccount, impersonating each plugin's; native process i acts as plugin copy
//! i's ServiceAccount.

mod pod_counting;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::Client;
use pod_counting::identity::{HOST_ACCOUNT, POD_COUNTER_ACCOUNT, kubeconfig_as};
use pod_counting::*;
use serde_json::json;

/// How long the other controllers get to sync after the first wrote the count.
const SETTLE: Duration = Duration::from_secs(5);

/// What one set of controllers measured, summed over its processes.
#[derive(Clone, Copy)]
struct Sample {
    /// Resident memory once synced, before the burst (MiB).
    idle_mib: f64,
    /// Resident memory after the burst (MiB).
    after_mib: f64,
    /// Peak resident memory (MiB).
    peak_mib: f64,
    /// CPU seconds over the burst.
    cpu: f64,
}

fn main() -> Result<()> {
    let sizes = env_list("WCM_DENSITY_SIZES", "1,10,50")?;
    let burst = env_list("WCM_DENSITY_BURST", "500")?[0];
    let (plane, runtime, client) = connect()?;
    let peer = repo("target/peers/controller-runtime-pod-counter");
    anyhow::ensure!(
        peer.exists(),
        "{}: run scripts/build-peers.sh",
        peer.display()
    );
    let crd = repo("plugins/deployment-reconcile/webapp-crd.yaml");
    let crd = crd.to_str().context("a UTF-8 path")?;
    let applied = kubectl(plane, &["apply", "-f", crd], None)?;
    anyhow::ensure!(applied.success(), "kubectl apply -f {crd}");
    runtime.block_on(mark_existing_pods(&client))?;
    println!("density: a burst of {burst} Pods per set, client rate {QPS}/s per controller");
    let mut rows = Vec::new();
    let mut grants = Grants::new(plane);
    for &n in &sizes {
        let copies = tempfile::tempdir()?;
        write_plugins(copies.path(), &pod_counters(n))?;
        grants.grant(copies.path())?;
        let as_host = runtime.block_on(kubeconfig_as(plane, HOST_ACCOUNT, copies.path()))?;
        let copies_host = vec![(host_command(copies.path()), as_host.clone())];
        let in_host = runtime.block_on(measure(&client, copies_host, burst))?;
        // Native copy i acts as plugin copy i's ServiceAccount, with its rights.
        let natives = runtime.block_on(async {
            let mut natives = Vec::new();
            for i in 0..n {
                let account = format!("{POD_COUNTER_ACCOUNT}-{i}");
                let kubeconfig = kubeconfig_as(plane, &account, copies.path()).await?;
                natives.push((controller_runtime_command(&peer), kubeconfig));
            }
            anyhow::Ok(natives)
        })?;
        let natives = runtime.block_on(measure(&client, natives, burst))?;
        let mixed_dir = tempfile::tempdir()?;
        write_plugins(mixed_dir.path(), &mixed(n))?;
        grants.grant(mixed_dir.path())?;
        let mixed_host = vec![(host_command(mixed_dir.path()), as_host)];
        let mixed = runtime.block_on(measure(&client, mixed_host, burst))?;
        rows.push((n, [in_host, natives, mixed]));
    }
    report(&rows);
    Ok(())
}

/// `n` copies of pod-counter: (file stem, component, settings).
fn pod_counters(n: usize) -> Vec<(String, &'static str, Option<String>)> {
    (0..n)
        .map(|i| {
            (
                format!("pod-counter-{i}"),
                "target/plugins/pod-counter.wasm",
                None,
            )
        })
        .collect()
}

/// A mix of `n` plugins: pod-counter, phase-labeller and data-hash (from 3 on), then
/// copies of deployment-reconcile and pod-counter in turn.
fn mixed(n: usize) -> Vec<(String, &'static str, Option<String>)> {
    let mut plugins = pod_counters(1);
    if n >= 3 {
        plugins.push((
            "phase-labeller".into(),
            "target/plugins/phase-labeller.wasm",
            None,
        ));
        plugins.push(("data-hash".into(), "target/plugins/data-hash.wasm", None));
    }
    let mut i = 1;
    while plugins.len() < n {
        plugins.push(match i % 2 {
            1 => (
                format!("deployment-reconcile-{i}"),
                "target/plugins/deployment-reconcile.wasm",
                Some(r#"{"registryNamespace": "default"}"#.to_string()),
            ),
            _ => (
                format!("pod-counter-{i}"),
                "target/plugins/pod-counter.wasm",
                None,
            ),
        });
        i += 1;
    }
    plugins.truncate(n);
    plugins
}

/// Copies each plugin into `dir` as `<stem>.wasm`, with settings naming it `<stem>`.
fn write_plugins(dir: &Path, plugins: &[(String, &str, Option<String>)]) -> Result<()> {
    for (stem, component, extra) in plugins {
        let from = repo(component);
        std::fs::copy(&from, dir.join(format!("{stem}.wasm")))
            .with_context(|| format!("{}: run `make plugins`", from.display()))?;
        let mut settings = match extra {
            Some(json) => serde_json::from_str(json)?,
            None => json!({}),
        };
        settings["name"] = json!(stem);
        std::fs::write(
            dir.join(format!("{stem}.settings.json")),
            settings.to_string(),
        )?;
    }
    Ok(())
}

/// Starts `commands`, waits until the count is written and the rest had time to sync,
/// reads their memory, runs a burst of `n` Pods to its last Event, reads memory and
/// CPU again, and stops them.
async fn measure(client: &Client, commands: Vec<(Command, PathBuf)>, n: usize) -> Result<Sample> {
    let baseline = stale_count(client).await?;
    let children = (commands.into_iter())
        .map(|(command, kubeconfig)| spawn(&kubeconfig, command))
        .collect::<Result<Vec<_>>>()?;
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let result = measure_running(client, &pids, n, baseline).await;
    children.into_iter().for_each(stop);
    result
}

async fn measure_running(
    client: &Client,
    pids: &[u32],
    n: usize,
    baseline: usize,
) -> Result<Sample> {
    let sum = |read: fn(u32) -> Result<f64>| -> Result<f64> {
        pids.iter().map(|&p| read(p)).sum::<Result<f64>>()
    };
    until(|| label_is(client, baseline))
        .await
        .context("the controllers never synced")?;
    tokio::time::sleep(SETTLE).await;
    let idle_mib = sum(rss_mib)?;
    let (namespaces, namespace) = burst_namespace(client, "density").await?;
    let cpu_before = sum(cpu_seconds)?;
    let events = arrival::events_reach(client, &namespace, n);
    create_pods(client, &namespace, n).await?;
    events.await?.context("Events missing")?;
    let sample = Sample {
        idle_mib,
        after_mib: sum(rss_mib)?,
        peak_mib: sum(peak_rss_mib)?,
        cpu: sum(cpu_seconds)? - cpu_before,
    };
    delete_namespace(&namespaces, &namespace).await?;
    Ok(sample)
}

/// Current resident memory (`VmRSS`) in MiB.
fn rss_mib(pid: u32) -> Result<f64> {
    proc_status_mib(pid, "VmRSS:")
}

fn report(rows: &[(usize, [Sample; 3])]) {
    let sets = [
        "host, N × pod-counter",
        "N × controller-runtime",
        "host, mixed N plugins",
    ];
    println!(
        "\n{:>4} {:26} {:>10} {:>10} {:>10} {:>8}",
        "N", "controllers", "idle MiB", "after MiB", "peak MiB", "CPU s"
    );
    for (n, samples) in rows {
        for (set, s) in sets.iter().zip(samples) {
            println!(
                "{n:>4} {set:26} {:>10.1} {:>10.1} {:>10.1} {:>8.2}",
                s.idle_mib, s.after_mib, s.peak_mib, s.cpu
            );
        }
    }
    let (Some((n0, first)), Some((n1, last))) = (rows.first(), rows.last()) else {
        return;
    };
    if n1 <= n0 {
        return;
    }
    println!("\nper additional controller, N = {n0} → {n1} (after the burst):");
    for (i, set) in sets.iter().enumerate() {
        let per = (last[i].after_mib - first[i].after_mib) / (n1 - n0) as f64;
        println!("  {set:26} {per:>8.2} MiB");
    }
}
