//! A thousand different plugins in one host: N copies of pod-counter whose bytes all
//! differ (each carries a custom section of its own, so no two share a content hash
//! and none shares compiled code), loaded cold (an empty compile cache: every copy
//! compiled by a compile worker) and warm (a restart on the cache the cold start
//! filled). For each start: the time until every copy is loaded, the time until every
//! copy has reconciled (`controller_runtime_reconcile_total`), the daemon's resident
//! memory then and its peak. `make bench`.
//!
//! `WCM_DISTINCT_PLUGINS` (default 1000) sets N; `WCM_DISTINCT_PLUGIN` (default
//! `pod-counter`) the example copied, e.g. `phase-labeller` for Python (its entries
//! are some 36 MB each: `WCM_DISTINCT_CACHE_MIB`, default 1024, bounds the compile
//! cache). Each copy acts as its own ServiceAccount (`Grants`), as deployed, and
//! watches what its example watches; the copies share their informers, as copies of
//! one plugin do.
//!
//! The host runs in a memory cgroup of its own (cgroup v1, as on this machine), so the
//! bench also reports its working set as the kubelet and cAdvisor count it (usage
//! less inactive file pages: what a container's memory limit and eviction act on);
//! `WCM_DISTINCT_LIMIT_MIB` sets that cgroup's limit, to show the host runs within it.

mod pod_counting;

#[path = "../tests/support/builds.rs"]
mod builds;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use pod_counting::identity::{HOST_ACCOUNT, kubeconfig_as};
use pod_counting::*;

/// How long one start may take before the bench gives up on it.
const START_LIMIT: Duration = Duration::from_secs(1200);

/// One start of the host on the N copies.
#[derive(Debug, Clone)]
struct Start {
    /// Seconds from the process's start until every copy is loaded.
    loaded_s: f64,
    /// Seconds until every copy has reconciled at least once.
    reconciled_s: f64,
    /// Resident memory once every copy reconciled (MiB).
    rss_mib: f64,
    /// Peak resident memory (MiB).
    peak_mib: f64,
    /// Of the resident memory then: anonymous, file-backed and shared (MiB).
    anon_mib: f64,
    file_mib: f64,
    shmem_mib: f64,
    /// The cgroup's working set then, and its peak usage (MiB), if it has one.
    working_set_mib: Option<f64>,
    cgroup_peak_mib: Option<f64>,
    /// Seconds spent in each step of loading (`wcm_plugin_load_seconds`), summed over
    /// the copies (they overlap, so the sum exceeds the time taken).
    steps: BTreeMap<String, f64>,
}

fn main() -> Result<()> {
    let n = env_list("WCM_DISTINCT_PLUGINS", "1000")?[0];
    let example = std::env::var("WCM_DISTINCT_PLUGIN").unwrap_or("pod-counter".into());
    let cache_mib = env_list("WCM_DISTINCT_CACHE_MIB", "1024")?[0];
    let limit_mib = std::env::var("WCM_DISTINCT_LIMIT_MIB").ok();
    let limit_mib = limit_mib.map(|l| l.parse::<u64>()).transpose()?;
    let (plane, runtime, client) = connect()?;
    runtime.block_on(mark_existing_pods(&client))?;
    let plugins = tempfile::tempdir()?;
    write_distinct_copies(plugins.path(), &example, n)?;
    let mut grants = Grants::new(plane);
    grants.grant(plugins.path())?;
    let identity = tempfile::tempdir()?;
    let kubeconfig = runtime.block_on(kubeconfig_as(plane, HOST_ACCOUNT, identity.path()))?;
    let cache = tempfile::tempdir()?;
    let host = |cache: &Path| {
        let mut command = host_command(plugins.path());
        command.arg("--compile-cache-dir").arg(cache);
        command.args(["--compile-cache-max-mib", &cache_mib.to_string()]);
        command
    };
    let cold = start(&kubeconfig, host(cache.path()), n, limit_mib)?;
    eprintln!("cold: {cold:?}");
    let warm = start(&kubeconfig, host(cache.path()), n, limit_mib)?;
    eprintln!("warm: {warm:?}");
    println!("\ndistinct: {n} different copies of {example} (no two share a content hash)");
    println!(
        "{:<6} {:>14} {:>18} {:>9} {:>9} {:>22}",
        "cache", "all loaded s", "all reconciled s", "RSS MiB", "peak MiB", "anon / file / shmem"
    );
    for (what, s) in [("cold", &cold), ("warm", &warm)] {
        println!(
            "{what:<6} {:>14.1} {:>18.1} {:>9.0} {:>9.0} {:>8.0} / {:.0} / {:.0}",
            s.loaded_s, s.reconciled_s, s.rss_mib, s.peak_mib, s.anon_mib, s.file_mib, s.shmem_mib
        );
    }
    println!("\nmemory cgroup (limit {limit_mib:?} MiB): working set and peak usage, MiB");
    for (what, s) in [("cold", &cold), ("warm", &warm)] {
        println!(
            "{what:<6} {:?} / {:?}",
            s.working_set_mib, s.cgroup_peak_mib
        );
    }
    println!("\nseconds per load step, summed over the copies:");
    for (what, s) in [("cold", &cold), ("warm", &warm)] {
        let steps: Vec<String> = (s.steps.iter())
            .map(|(step, took)| format!("{step} {took:.1}"))
            .collect();
        println!("{what:<6} {}", steps.join(", "));
    }
    Ok(())
}

/// Writes `n` copies of `example` into `dir`, copy `i` as `<example>-i.wasm` named
/// `<example>-i` by its settings, with a custom section holding its name appended.
fn write_distinct_copies(dir: &Path, example: &str, n: usize) -> Result<()> {
    let from = repo(&format!("target/plugins/{example}.wasm"));
    let component =
        std::fs::read(&from).with_context(|| format!("{}: run `make plugins`", from.display()))?;
    for i in 0..n {
        let stem = format!("{example}-{i}");
        let bytes = builds::another_build(&component, &stem);
        std::fs::write(dir.join(format!("{stem}.wasm")), bytes)?;
        let settings = serde_json::json!({ "name": stem });
        std::fs::write(
            dir.join(format!("{stem}.settings.json")),
            settings.to_string(),
        )?;
    }
    Ok(())
}

/// Starts the host `command` in a memory cgroup of its own (limited to `limit_mib`
/// if given), waits until all `n` copies are loaded and have reconciled, samples its
/// memory and stops it.
fn start(kubeconfig: &Path, command: Command, n: usize, limit_mib: Option<u64>) -> Result<Start> {
    let cgroup = MemoryCgroup::new(limit_mib)?;
    let command = match &cgroup {
        Some(cgroup) => cgroup.wrap(&command),
        None => command,
    };
    let started = Instant::now();
    let (mut child, lines) = spawn_logging(kubeconfig, command)?;
    let result = watch_start(&child, &lines, started, n).and_then(|mut start| {
        if let Some(cgroup) = &cgroup {
            start.working_set_mib = Some(cgroup.working_set_mib()?);
            start.cgroup_peak_mib = Some(cgroup.stat_mib("memory.max_usage_in_bytes")?);
        }
        Ok(start)
    });
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    result
}

/// A cgroup v1 memory cgroup for one start of the host, removed when dropped.
struct MemoryCgroup {
    dir: std::path::PathBuf,
}

impl MemoryCgroup {
    /// A new cgroup limited to `limit_mib`, or `None` without cgroup v1's memory
    /// controller.
    fn new(limit_mib: Option<u64>) -> Result<Option<MemoryCgroup>> {
        let root = Path::new("/sys/fs/cgroup/memory");
        if !root.join("memory.usage_in_bytes").exists() {
            return Ok(None);
        }
        let dir = root.join(format!("wcm-bench-distinct-{}", rand_suffix()));
        std::fs::create_dir(&dir).with_context(|| format!("{}", dir.display()))?;
        let cgroup = MemoryCgroup { dir };
        if let Some(mib) = limit_mib {
            let limit = (mib << 20).to_string();
            std::fs::write(cgroup.dir.join("memory.limit_in_bytes"), limit)?;
        }
        Ok(Some(cgroup))
    }

    /// `command` run by a shell that first moves itself into this cgroup.
    fn wrap(&self, command: &Command) -> Command {
        let procs = self.dir.join("cgroup.procs");
        let script = format!("echo $$ > {} && exec \"$0\" \"$@\"", procs.display());
        let mut wrapped = Command::new("sh");
        wrapped.arg("-c").arg(script).arg(command.get_program());
        wrapped.args(command.get_args());
        wrapped
    }

    /// A byte count of the cgroup's, in MiB.
    fn stat_mib(&self, file: &str) -> Result<f64> {
        let text = std::fs::read_to_string(self.dir.join(file))?;
        Ok(text.trim().parse::<f64>()? / (1 << 20) as f64)
    }

    /// Usage less inactive file pages, as cAdvisor's `container_memory_working_set_bytes`.
    fn working_set_mib(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(self.dir.join("memory.stat"))?;
        let inactive = (stat.lines())
            .find_map(|l| l.strip_prefix("total_inactive_file "))
            .context("memory.stat has no total_inactive_file")?;
        let inactive = inactive.trim().parse::<f64>()? / (1 << 20) as f64;
        Ok(self.stat_mib("memory.usage_in_bytes")? - inactive)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Empty once the host and its workers exited; retried while they exit.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn watch_start(
    child: &Child,
    seen: &mpsc::Receiver<String>,
    started: Instant,
    n: usize,
) -> Result<Start> {
    let (mut loaded, mut metrics) = (0, None);
    while loaded < n {
        let left = START_LIMIT.saturating_sub(started.elapsed());
        let line = seen.recv_timeout(left);
        let line = line.context("the host never loaded every copy")?;
        if line.contains("plugin failed to load") || line.contains("plugin does not start") {
            bail!("{line}");
        }
        if line.contains("serving /metrics") {
            metrics = line.split("address=").nth(1).map(str::to_string);
        }
        loaded += usize::from(line.contains("plugin loaded"));
    }
    let loaded_s = started.elapsed().as_secs_f64();
    let metrics = metrics.context("the host never said where it serves /metrics")?;
    while reconciled(&metrics_text(&metrics)?) < n {
        if started.elapsed() > START_LIMIT {
            bail!("not every copy reconciled within {START_LIMIT:?}");
        }
        std::thread::sleep(POLL * 5);
    }
    let reconciled_s = started.elapsed().as_secs_f64();
    let pid = child.id();
    Ok(Start {
        loaded_s,
        reconciled_s,
        rss_mib: proc_status_mib(pid, "VmRSS:")?,
        peak_mib: peak_rss_mib(pid)?,
        anon_mib: proc_status_mib(pid, "RssAnon:")?,
        file_mib: proc_status_mib(pid, "RssFile:")?,
        shmem_mib: proc_status_mib(pid, "RssShmem:")?,
        working_set_mib: None,
        cgroup_peak_mib: None,
        steps: load_steps(&metrics_text(&metrics)?),
    })
}

/// What the host at `address` serves on `/metrics`.
fn metrics_text(address: &str) -> Result<String> {
    let out = Command::new("curl")
        .args(["-sf", &format!("http://{address}/metrics")])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `wcm_plugin_load_seconds_sum` by step.
fn load_steps(metrics: &str) -> BTreeMap<String, f64> {
    (metrics.lines())
        .filter_map(|l| l.strip_prefix("wcm_plugin_load_seconds_sum{step=\""))
        .filter_map(|l| {
            let (step, rest) = l.split_once('"')?;
            let took = rest.rsplit(' ').next()?.parse().ok()?;
            Some((step.to_string(), took))
        })
        .collect()
}

/// How many plugins the metrics say reconciled successfully at least once.
fn reconciled(metrics: &str) -> usize {
    let controllers: HashSet<&str> = (metrics.lines())
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter(|l| l.contains("result=\"success\"") && !l.ends_with(" 0"))
        .filter_map(|l| l.split("controller=\"").nth(1)?.split('"').next())
        .collect();
    controllers.len()
}
