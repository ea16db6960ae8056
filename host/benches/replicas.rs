//! Every replica working (`--leader-elect-mode=per-plugin`): nine plugins — the five
//! examples (Rust, Go, JavaScript, Python) under names of their own and four copies
//! of the label-mirror test plugin, each writing a label of its own — over 1, 2 and
//! 3 replicas of the release host, with kube-controller-manager's Lease timings, on
//! a mixed workload (ConfigMaps to mirror and hash, pending Pods to mirror, label
//! and count, Deployments to reload, WebApps to turn into Deployments; the tests'
//! workload, `tests/support/plugin_workload.rs`, larger). For each count: the time a burst of
//! changes takes to converge (median of the rounds), CPU seconds and resident memory
//! per replica, the Lease writes a minute costs the API server when idle (from its
//! audit log), and, from two replicas on, the time until every plugin of a replica
//! stopped with SIGTERM (a drained hand-over) or SIGKILL (a crash) is held again,
//! how long the takers took to read the taken plugins' parked code back (median and
//! slowest, from their logs), and how long the first burst after the crash takes to
//! converge (the taken plugins relist and serve).
//! `make bench` (the control plane must run; `make bench` starts it);
//! `WCM_BENCH_HOST=PATH` measures another build of the host instead;
//! `WCM_BENCH_REPLICAS` (default `1,2,3`) chooses the rows.

// The tests' workload; the bench leaves some of it unused.
#[allow(dead_code)]
#[path = "../tests/support/plugin_workload.rs"]
mod plugin_workload;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use kube::{Api, Client};
use plugin_workload::{PLUGINS, Workload, compile_once, nine_plugins, plugin_files};
use wcm_control_plane::{ControlPlane, TestNamespace};

/// One burst: 210 objects of four kinds, each changed by at least two plugins.
const BURST: Workload = Workload {
    config_maps: 100,
    pods: 50,
    reloads: 10,
    webapps: 50,
};
const ROUNDS: usize = 3;
const WAIT: Duration = Duration::from_secs(180);
const IDLE: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    install_webapp_crd(plane, &root)?;
    let file = |name: &str| {
        let built = root.join("target/plugins").join(format!("{name}.wasm"));
        match built.exists() {
            true => built,
            false => root
                .join("target/test-plugins")
                .join(format!("{name}.wasm")),
        }
    };
    let files = plugin_files(file);
    ensure!(files.iter().all(|f| f.exists()), "run `make plugins` first");
    compile_once(
        Path::new(env!("CARGO_BIN_EXE_wasm-controller-manager")),
        &files,
    )?;
    let dir = nine_plugins(file)?;
    println!(
        "replicas  converge(median)  cpu s/replica  rss MiB/replica  lease writes/min  drained hand-over  crash hand-over  read-back med/max  burst after crash"
    );
    let counts = std::env::var("WCM_BENCH_REPLICAS").unwrap_or_else(|_| "1,2,3".to_string());
    for replicas in counts.split(',').map(str::parse::<usize>) {
        let replicas = replicas.context("WCM_BENCH_REPLICAS: counts of replicas, 1,2,3")?;
        let row = measure(plane, dir.path(), replicas).await?;
        println!("{row}");
    }
    Ok(())
}

/// Applies deployment-reconcile's WebApp CRD and waits until it is established.
fn install_webapp_crd(plane: &ControlPlane, root: &Path) -> Result<()> {
    let crd = root.join("plugins/deployment-reconcile/webapp-crd.yaml");
    let kubectl = |args: &[&str]| -> Result<()> {
        let out = Command::new(ControlPlane::kubectl())
            .args(args)
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .output()?;
        ensure!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    let file = crd.to_str().context("path")?;
    kubectl(&["apply", "--server-side", "--force-conflicts", "-f", file])?;
    let crd = "crd/webapps.demo.wasm-controller-manager.io";
    kubectl(&["wait", "--for=condition=Established", "--timeout=60s", crd])
}

/// One host process of the group `group` in namespace `ns`.
struct Replica {
    identity: String,
    child: Child,
    /// Its log: warnings, and the read-backs of parked code.
    log: tempfile::NamedTempFile,
}

impl Replica {
    fn start(plane: &ControlPlane, dir: &Path, ns: &str, identity: &str) -> Result<Replica> {
        let log = tempfile::NamedTempFile::new()?;
        let child = Command::new(host_binary())
            .args([
                "run",
                "--metrics-bind-address",
                "0",
                "--impersonate-plugins=false",
            ])
            .arg("--plugins-dir")
            .arg(dir)
            .args(["--leader-elect", "--leader-elect-mode=per-plugin"])
            .arg(format!("--leader-elect-identity={identity}"))
            .arg(format!("--leader-elect-resource-name={ns}"))
            .arg(format!("--leader-elect-resource-namespace={ns}"))
            .args(["--plugin-api-qps", "1000", "--plugin-api-burst", "1000"])
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("RUST_LOG", "warn,wcm_daemon::controller::residency=info")
            .stderr(Stdio::from(log.reopen()?))
            .spawn()?;
        Ok(Replica {
            identity: identity.to_string(),
            child,
            log,
        })
    }

    /// Milliseconds each read-back of parked code took so far (taking a plugin's
    /// Lease), in the order logged.
    fn read_backs(&self) -> Result<Vec<f64>> {
        let text = std::fs::read_to_string(self.log.path())?;
        let lines = text.lines().filter(|l| l.contains("code read back"));
        lines
            .map(|line| {
                let took = line.split("took=").nth(1).context("took=")?;
                millis(took.split_whitespace().next().context("took")?)
            })
            .collect()
    }

    /// User and system CPU seconds so far, and resident memory in MiB.
    fn usage(&self) -> Result<(f64, f64)> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .context("stat")?
            .1
            .split_whitespace()
            .collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let rss = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .context("VmRSS")?;
        let kib: f64 = rss.split_whitespace().nth(1).context("VmRSS")?.parse()?;
        Ok((ticks / 100.0, kib / 1024.0))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The host measured: this build's, or `WCM_BENCH_HOST` (another build, to compare
/// side by side on the same control plane).
fn host_binary() -> std::path::PathBuf {
    match std::env::var_os("WCM_BENCH_HOST") {
        Some(path) => path.into(),
        None => env!("CARGO_BIN_EXE_wasm-controller-manager").into(),
    }
}

/// Milliseconds of a duration as `Debug` prints it (`51.2ms`, `812.5µs`, `1.2s`).
fn millis(text: &str) -> Result<f64> {
    let units = [("ns", 1e-6), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3)];
    let (number, scale) = (units.iter())
        .find_map(|(unit, scale)| Some((text.strip_suffix(unit)?, *scale)))
        .with_context(|| format!("a duration: {text}"))?;
    Ok(number.parse::<f64>()? * scale)
}

/// The read-backs `group` logged after the first `before` of each replica's.
fn new_read_backs(group: &[Replica], before: &[usize]) -> Result<Vec<f64>> {
    let mut all = Vec::new();
    for (replica, seen) in group.iter().zip(before.iter().chain(std::iter::repeat(&0))) {
        all.extend(replica.read_backs()?.into_iter().skip(*seen));
    }
    Ok(all)
}

/// "median / max ms" of `times`, or `-`.
fn median_max(mut times: Vec<f64>) -> String {
    if times.is_empty() {
        return "-".to_string();
    }
    times.sort_by(f64::total_cmp);
    format!(
        "{:.0} / {:.0} ms",
        times[times.len() / 2],
        times[times.len() - 1]
    )
}

/// Each plugin's Lease holder in `ns` (empty while released).
async fn holders(client: &Client, ns: &str) -> Result<BTreeMap<String, String>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let leases = api
        .list(&ListParams::default().labels("wasm-controller-manager.io/plugin"))
        .await?;
    Ok(leases
        .into_iter()
        .filter_map(|l| {
            let plugin = l
                .metadata
                .labels?
                .get("wasm-controller-manager.io/plugin")?
                .clone();
            Some((plugin, l.spec?.holder_identity.unwrap_or_default()))
        })
        .collect())
}

/// Waits until every plugin is held by one of `live`.
async fn all_held(client: &Client, ns: &str, live: &[&str]) -> Result<Duration> {
    let started = Instant::now();
    while started.elapsed() < WAIT {
        let held = holders(client, ns).await?;
        if held.len() == PLUGINS && held.values().all(|h| live.contains(&h.as_str())) {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the plugins were not all held by {live:?}")
}

/// Changes every object of the burst to `value`, then times until every plugin's
/// work is on every one.
async fn burst(client: &Client, ns: &str, value: &str) -> Result<Duration> {
    let started = Instant::now();
    BURST.round(client, ns, value).await?;
    BURST.converged(client, ns, value, WAIT).await?;
    Ok(started.elapsed())
}

/// Lease updates in `ns` the API server's audit log recorded since `since`.
fn lease_writes(
    plane: &ControlPlane,
    ns: &str,
    since: k8s_openapi::jiff::Timestamp,
) -> Result<usize> {
    let text = std::fs::read_to_string(plane.audit_log())?;
    let mut writes = 0;
    for line in text.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)?;
        let object = &entry["objectRef"];
        let ours = object["resource"] == "leases" && object["namespace"] == ns;
        let write = ["update", "create"].contains(&entry["verb"].as_str().unwrap_or_default());
        let at: Option<k8s_openapi::jiff::Timestamp> = entry["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse().ok());
        if ours && write && at.is_some_and(|t| t >= since) && entry["stage"] == "ResponseComplete" {
            writes += 1;
        }
    }
    Ok(writes)
}

/// Stops one replica (`kill`: SIGKILL, else SIGTERM) and times until the others hold
/// every plugin again.
async fn hand_over(
    client: &Client,
    ns: &str,
    replicas: &mut Vec<Replica>,
    kill: bool,
) -> Result<Duration> {
    let mut gone = replicas.remove(0);
    let started = Instant::now();
    match kill {
        true => gone.child.kill()?,
        false => drop(
            Command::new("kill")
                .args(["-TERM", &gone.child.id().to_string()])
                .status()?,
        ),
    }
    let live: Vec<&str> = replicas.iter().map(|r| r.identity.as_str()).collect();
    all_held(client, ns, &live).await?;
    let took = started.elapsed();
    let _ = gone.child.wait();
    Ok(took)
}

/// Waits until `group` holds every plugin, and the spread settles.
async fn settled(client: &Client, ns: &str, group: &[Replica]) -> Result<()> {
    let live: Vec<&str> = group.iter().map(|r| r.identity.as_str()).collect();
    all_held(client, ns, &live).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}

/// One row: `replicas` replicas of the host.
async fn measure(plane: &ControlPlane, dir: &Path, replicas: usize) -> Result<String> {
    let ns = TestNamespace::create("bench-replicas").await?;
    let (client, name) = (ns.client(), ns.name().to_string());
    let mut group: Vec<Replica> = (0..replicas)
        .map(|i| Replica::start(plane, dir, &name, &format!("replica-{i}")))
        .collect::<Result<_>>()?;
    settled(&client, &name, &group).await?;
    let before: Vec<f64> = group
        .iter()
        .map(|r| r.usage().map(|u| u.0))
        .collect::<Result<_>>()?;
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        times.push(burst(&client, &name, &format!("v{round}")).await?);
    }
    times.sort();
    let usage: Vec<(f64, f64)> = group.iter().map(Replica::usage).collect::<Result<_>>()?;
    let cpu = usage.iter().zip(&before).map(|(u, b)| u.0 - b).sum::<f64>() / replicas as f64;
    let rss = usage.iter().map(|u| u.1).sum::<f64>() / replicas as f64;
    let idle_from = k8s_openapi::jiff::Timestamp::now();
    tokio::time::sleep(IDLE).await;
    let per_minute = lease_writes(plane, &name, idle_from)? as f64 * 60.0 / IDLE.as_secs_f64();
    let (mut drained, mut crashed) = ("-".to_string(), "-".to_string());
    let (mut read_back, mut after_crash) = ("-".to_string(), "-".to_string());
    if replicas >= 2 {
        let counts = |group: &[Replica]| -> Result<Vec<usize>> {
            group.iter().map(|r| Ok(r.read_backs()?.len())).collect()
        };
        let before = counts(&group[1..])?;
        drained = format!(
            "{:.1} s",
            hand_over(&client, &name, &mut group, false)
                .await?
                .as_secs_f64()
        );
        let mut taken = new_read_backs(&group, &before)?;
        group.push(Replica::start(plane, dir, &name, "replica-back")?);
        settled(&client, &name, &group).await?;
        let before = counts(&group[1..])?;
        crashed = format!(
            "{:.1} s",
            hand_over(&client, &name, &mut group, true)
                .await?
                .as_secs_f64()
        );
        // The burst the survivors serve first: the taken plugins' caches relisted,
        // their code read back.
        after_crash = format!(
            "{:.2} s",
            burst(&client, &name, "after").await?.as_secs_f64()
        );
        taken.extend(new_read_backs(&group, &before)?);
        read_back = median_max(taken);
    }
    Ok(format!(
        "{replicas:<9} {:<17} {cpu:<14.1} {rss:<16.0} {per_minute:<17.0} {drained:<18} {crashed:<16} {read_back:<20} {after_crash}",
        format!("{:.2} s", times[ROUNDS / 2].as_secs_f64())
    ))
}
