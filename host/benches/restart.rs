//! A host (re)starting on the five example plugins (Rust, Go, Python, JavaScript):
//! time from the process's start until every plugin is loaded, the daemon's peak
//! resident memory meanwhile and its resident memory once loaded; cold (an empty
//! compile cache: every plugin compiled by a compile worker) and warm (a restart on
//! the cache the cold start filled). Medians of [`ROUNDS`]; `make bench`.
//!
//! The host acts as its ServiceAccount, the plugins as theirs (`Grants`), so each
//! plugin starts its informers as deployed. The daemon's memory is the daemon's alone:
//! compilation runs in child processes, whose memory is bounded by
//! `--compile-max-memory-mib` and given back when they exit.

mod pod_counting;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use pod_counting::identity::{HOST_ACCOUNT, kubeconfig_as};
use pod_counting::*;

const ROUNDS: usize = 3;
const EXAMPLES: [&str; 5] = [
    "pod-counter",
    "deployment-reconcile",
    "config-reloader",
    "phase-labeller",
    "data-hash",
];

/// One start of the host.
#[derive(Debug, Clone, Copy)]
struct Start {
    loaded_s: f64,
    peak_mib: f64,
    after_mib: f64,
}

fn main() -> Result<()> {
    let (plane, runtime, _client) = connect()?;
    let plugins = tempfile::tempdir()?;
    for name in EXAMPLES {
        let file = format!("{name}.wasm");
        std::fs::copy(
            repo(&format!("target/plugins/{file}")),
            plugins.path().join(&file),
        )
        .with_context(|| format!("target/plugins/{file}: run `make plugins`"))?;
    }
    // deployment-reconcile's kind, so it runs rather than waits for it.
    let crd = repo("plugins/deployment-reconcile/webapp-crd.yaml");
    let crd = crd.to_str().context("repository path")?;
    anyhow::ensure!(
        kubectl(plane, &["apply", "-f", crd], None)?.success(),
        "{crd}"
    );
    let mut grants = Grants::new(plane);
    grants.grant(plugins.path())?;
    let identity = tempfile::tempdir()?;
    let kubeconfig = runtime.block_on(kubeconfig_as(plane, HOST_ACCOUNT, identity.path()))?;
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let cache = tempfile::tempdir()?;
        cold.push(start(&kubeconfig, plugins.path(), cache.path())?);
        warm.push(start(&kubeconfig, plugins.path(), cache.path())?);
        eprintln!(
            "round {round}: cold {:?}, warm {:?}",
            cold[round - 1],
            warm[round - 1]
        );
    }
    println!("\nrestart: five examples (Rust x2, Go, Python, JavaScript), medians of {ROUNDS}");
    println!(
        "{:<6} {:>16} {:>16} {:>22}",
        "cache", "all loaded s", "daemon peak MiB", "daemon loaded MiB"
    );
    for (what, starts) in [("cold", cold), ("warm", warm)] {
        let of = |f: fn(&Start) -> f64| median(starts.iter().map(f).collect());
        println!(
            "{what:<6} {:>16.2} {:>16.0} {:>22.0}",
            of(|s| s.loaded_s),
            of(|s| s.peak_mib),
            of(|s| s.after_mib)
        );
    }
    Ok(())
}

/// Starts the host on `plugins` with `cache` and waits until every plugin is loaded.
fn start(kubeconfig: &Path, plugins: &Path, cache: &Path) -> Result<Start> {
    let started = Instant::now();
    let mut command = host_command(plugins);
    command.arg("--compile-cache-dir").arg(cache);
    let (mut child, seen) = spawn_logging(kubeconfig, command)?;
    let mut loaded = 0;
    while loaded < EXAMPLES.len() {
        let line = seen.recv_timeout(Duration::from_secs(300));
        let line = line.context("the host never loaded every plugin")?;
        if line.contains("plugin failed to load") || line.contains("plugin does not start") {
            bail!("{line}");
        }
        loaded += usize::from(line.contains("plugin loaded"));
    }
    let loaded_s = started.elapsed().as_secs_f64();
    // What loading left behind, once the allocator has settled.
    std::thread::sleep(Duration::from_secs(2));
    let pid = child.id();
    let sample = Start {
        loaded_s,
        peak_mib: peak_rss_mib(pid)?,
        after_mib: proc_status_mib(pid, "VmRSS:")?,
    };
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
    Ok(sample)
}
