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
//! stopped with SIGTERM (a drained hand-over) or SIGKILL (a crash) is held again.
//! `make bench` (the control plane must run; `make bench` starts it).

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
        "replicas  converge(median)  cpu s/replica  rss MiB/replica  lease writes/min  drained hand-over  crash hand-over"
    );
    for replicas in 1..=3 {
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
}

impl Replica {
    fn start(plane: &ControlPlane, dir: &Path, ns: &str, identity: &str) -> Result<Replica> {
        let child = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
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
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Replica {
            identity: identity.to_string(),
            child,
        })
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
    if replicas >= 2 {
        drained = format!(
            "{:.1} s",
            hand_over(&client, &name, &mut group, false)
                .await?
                .as_secs_f64()
        );
        group.push(Replica::start(plane, dir, &name, "replica-back")?);
        settled(&client, &name, &group).await?;
        crashed = format!(
            "{:.1} s",
            hand_over(&client, &name, &mut group, true)
                .await?
                .as_secs_f64()
        );
    }
    Ok(format!(
        "{replicas:<9} {:<17} {cpu:<14.1} {rss:<16.0} {per_minute:<17.0} {drained:<18} {crashed}",
        format!("{:.2} s", times[ROUNDS / 2].as_secs_f64())
    ))
}
