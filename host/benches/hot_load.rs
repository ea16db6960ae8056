//! Time from a plugin file appearing in the plugins directory to the first reconcile of
//! that version, split into settle (notify + debounce), compile or cache hit, link,
//! register, and start to first reconcile; pod-counter, cold (no compile cache) and
//! cached. Runs the release host binary against the local control plane; `make bench`.
//!
//! Each phase is read from the host's own log: the `plugin loaded` line carries the
//! duration of each load step, and every log line carries a timestamp.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::PostParams;
use wcm_control_plane::{ControlPlane, TestNamespace};

const ROUNDS: usize = 5;
const SETTLE: &str = "200ms";

/// One measured load.
#[derive(Debug, Default, Clone, Copy)]
struct Phases {
    settle: f64,
    read: f64,
    compile: f64,
    link: f64,
    register: f64,
    review: f64,
    to_first_reconcile: f64,
    total: f64,
}

#[tokio::main]
async fn main() -> Result<()> {
    // pod-counter reconciles when a Pod or Node exists: give it a control-plane Node.
    let ns = TestNamespace::create("hot-load").await?;
    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {
        "name": format!("{}-cp", ns.name()),
        "labels": ns.labels().into_iter()
            .chain([("node-role.kubernetes.io/control-plane".to_string(), String::new())])
            .collect::<std::collections::BTreeMap<_, _>>(),
    }}))?;
    Api::<Node>::all(ns.client())
        .create(&PostParams::default(), &node)
        .await?;
    let plane = ControlPlane::shared()?;
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/plugins/pod-counter.wasm");
    let bytes = std::fs::read(&plugin).context("run `make plugins` first")?;
    let cache = tempfile::tempdir()?;
    for (name, flags) in [
        ("cold (compiled)", vec!["--no-compile-cache".to_string()]),
        (
            "cached",
            vec![
                "--compile-cache-dir".into(),
                cache.path().display().to_string(),
            ],
        ),
    ] {
        let (mut firsts, mut agains) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (plane, bytes, flags) = (plane.clone(), bytes.clone(), flags.clone());
            let round = tokio::task::spawn_blocking(move || two_loads(&plane, &bytes, &flags));
            let (first, again) = round.await??;
            firsts.push(first);
            agains.push(again);
        }
        report(&format!("{name}, new host"), &firsts);
        report(&format!("{name}, running host"), &agains);
    }
    Ok(())
}

/// Starts a host on an empty directory, drops the plugin in and times the phases;
/// then removes it and drops it in again, timing the load into a host that runs
/// already (its kinds discovered, its clients connected): the usual hot reload.
fn two_loads(plane: &ControlPlane, bytes: &[u8], flags: &[String]) -> Result<(Phases, Phases)> {
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args([
            "run",
            "--metrics-bind-address",
            "0",
            "--file-settle",
            SETTLE,
            "--plugins-dir",
        ])
        .arg(dir.path())
        .args(flags)
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .env("RUST_LOG", "info,wcm_daemon::controller=debug")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .spawn()?;
    let lines = log_lines(&mut child)?;
    let measured = (|| {
        wait_for(&lines, &["manager started"])?;
        let first = drop_in(dir.path(), bytes, &lines)?;
        std::fs::remove_file(dir.path().join("pod-counter.wasm"))?;
        wait_for(&lines, &["plugin removed"])?;
        let again = drop_in(dir.path(), bytes, &lines)?;
        Ok((first, again))
    })();
    let _ = child.kill();
    let _ = child.wait();
    measured
}

/// Renames the plugin into `dir` and times its load and first reconcile.
fn drop_in(dir: &Path, bytes: &[u8], lines: &mpsc::Receiver<String>) -> Result<Phases> {
    let staged = dir.join(".pod-counter.wasm");
    std::fs::write(&staged, bytes)?;
    std::fs::rename(&staged, dir.join("pod-counter.wasm"))?;
    let appeared = SystemTime::now();
    let loaded = wait_for(lines, &["plugin loaded"])?;
    let reconciled = wait_for(lines, &["reconciled", "pod-counter"])?;
    let field = |name: &str| duration_field(&loaded, name);
    let (loaded_at, reconciled_at) = (timestamp(&loaded)?, timestamp(&reconciled)?);
    let load_total = field("total")?;
    let since = |t: SystemTime| t.duration_since(appeared).unwrap_or_default().as_secs_f64();
    Ok(Phases {
        settle: since(loaded_at) - load_total,
        read: field("read")?,
        compile: field("compile")?,
        link: field("link")?,
        register: field("register")?,
        review: field("review")?,
        to_first_reconcile: reconciled_at
            .duration_since(loaded_at)
            .unwrap_or_default()
            .as_secs_f64(),
        total: since(reconciled_at),
    })
}

fn log_lines(child: &mut Child) -> Result<mpsc::Receiver<String>> {
    let stderr = child.stderr.take().context("stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

fn wait_for(lines: &mpsc::Receiver<String>, needles: &[&str]) -> Result<String> {
    loop {
        let line = lines.recv_timeout(Duration::from_secs(60))?;
        if line.contains("ERROR") {
            bail!("host error: {line}");
        }
        if needles.iter().all(|n| line.contains(n)) {
            return Ok(line);
        }
    }
}

/// The RFC 3339 timestamp that starts every log line.
fn timestamp(line: &str) -> Result<SystemTime> {
    let first = line.split_whitespace().next().context("empty line")?;
    Ok(humantime::parse_rfc3339(first)?)
}

/// A `name=1.23ms`-style field of a log line, in seconds.
fn duration_field(line: &str, name: &str) -> Result<f64> {
    let prefix = format!("{name}=");
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))
        .with_context(|| format!("no {name} in {line}"))?;
    let (number, unit) = value.split_at(
        value
            .find(|c: char| c.is_alphabetic() || c == 'µ')
            .unwrap_or(value.len()),
    );
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" | "us" => 1e-6,
        "ns" => 1e-9,
        _ => bail!("unit {unit:?} in {value}"),
    };
    Ok(number.parse::<f64>()? * scale)
}

fn report(name: &str, rounds: &[Phases]) {
    let median = |f: fn(&Phases) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] * 1e3
    };
    println!(
        "{name:30} settle {:>4.0} ms  read {:>5.1} ms  compile {:>6.1} ms  link {:>4.1} ms  \
         register {:>4.1} ms  review {:>5.1} ms  start→first reconcile {:>5.1} ms  \
         file→first reconcile {:>5.0} ms  (medians of {}, --file-settle {SETTLE})",
        median(|p| p.settle),
        median(|p| p.read),
        median(|p| p.compile),
        median(|p| p.link),
        median(|p| p.register),
        median(|p| p.review),
        median(|p| p.to_first_reconcile),
        median(|p| p.total),
        rounds.len()
    );
}
