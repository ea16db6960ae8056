//! The host with pod-counter against the same controller written natively with kube-rs
//! and with controller-runtime (`peers/`), one after the other against the same local
//! control plane: for bursts of Pods, the time from the burst's first create to the
//! correct count label, the time to the last `Counted` Event, the controller process's
//! CPU seconds over the burst, its peak RSS, and its API writes and lists per Pod
//! (from the API server's `apiserver_request_total`); medians of rounds, and ratios to
//! the fastest native peer. Every controller gets the same client rate (`PEER_QPS`), so
//! the comparison is of the controllers, not of their default rate limits.
//!
//! `make bench` builds the peers (`scripts/build-peers.sh`) and starts the control
//! plane. `WCM_BENCH_BURSTS` (default `500,2000,10000`) and `WCM_BENCH_ROUNDS`
//! (default 3) choose the work. The Pods stay Pending (the only node is tainted), so
//! no kubelet work is measured.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wcm_control_plane::{ControlPlane, NODE_NAME};

const COUNT: &str = "pod-counter.example.com/count";
const COUNTED: &str = "pod-counter.example.com/counted";
/// The client rate every controller gets (requests per second and burst).
const PEER_QPS: u32 = 1000;
/// Pods created at once by the burst.
const CREATORS: usize = 64;
const POLL: Duration = Duration::from_millis(100);
const LIMIT: Duration = Duration::from_secs(600);

/// One controller under test and how to start it.
struct Peer {
    name: &'static str,
    native: bool,
    start: fn(&Path, &Path) -> Command,
}

/// What one round of one burst measured of one controller.
#[derive(Clone, Copy)]
struct Sample {
    converge: f64,
    last_event: f64,
    cpu: f64,
    rss_mib: f64,
    /// The controller's writes per Pod of the burst (the API server's audit log).
    writes_per_pod: f64,
    /// The lists per Pod of the burst (the API server's metrics).
    lists_per_pod: f64,
}

/// Lists the API server has answered so far, not counting the bench's own Event
/// lists. Watches are left out: the API server counts a watch when it ends.
async fn api_lists(client: &Client) -> Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut lists = 0.0;
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let has = |label: &str| line.contains(label);
        if has("verb=\"LIST\"") && !has("resource=\"events\"") {
            lists += line.rsplit(' ').next().unwrap_or("0").parse::<f64>()?;
        }
    }
    Ok(lists)
}

/// The controller's writes in the audit log after byte `from`: every write but the
/// control plane's own (the scheduler's status patches and Events, the controller
/// manager's) and the bench's (Pod creates, namespaces). The audit policy logs every
/// write with its user agent.
fn controller_writes(audit: &Path, from: u64) -> Result<f64> {
    let text = std::fs::read(audit)?;
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    let mut writes = 0.0;
    for line in text[start..]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        let entry: serde_json::Value = serde_json::from_slice(line)?;
        let agent = entry["userAgent"].as_str().unwrap_or_default();
        let resource = entry["objectRef"]["resource"].as_str().unwrap_or_default();
        let control_plane = [
            "kube-scheduler",
            "kube-controller-manager",
            "kube-apiserver",
        ]
        .iter()
        .any(|c| agent.starts_with(c));
        let bench = resource == "namespaces" || (resource == "pods" && entry["verb"] == "create");
        if !control_plane && !bench {
            writes += 1.0;
        }
    }
    Ok(writes)
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn peers() -> [Peer; 3] {
    [
        Peer {
            name: "wasm-controller-manager + pod-counter",
            native: false,
            start: |plugins, _| {
                let mut c = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
                let qps = PEER_QPS.to_string();
                c.arg("run").arg("--plugins-dir").arg(plugins);
                c.args(["--metrics-bind-address", "127.0.0.1:0"]);
                c.args(["--plugin-api-qps", &qps, "--plugin-api-burst", &qps]);
                c
            },
        },
        Peer {
            name: "kube-rs (kube-runtime)",
            native: true,
            start: |_, target| Command::new(target.join("release/kube-rs-pod-counter")),
        },
        Peer {
            name: "controller-runtime",
            native: true,
            start: |_, target| {
                let mut c = Command::new(target.join("peers/controller-runtime-pod-counter"));
                let qps = PEER_QPS.to_string();
                c.args(["-qps", &qps, "-burst", &qps]);
                c
            },
        },
    ]
}

fn env_list(name: &str, default: &str) -> Result<Vec<usize>> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    (text.split(',').map(|n| n.trim().parse::<usize>()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("{name}={text}"))
}

fn main() -> Result<()> {
    let bursts = env_list("WCM_BENCH_BURSTS", "500,2000,10000")?;
    let rounds = env_list("WCM_BENCH_ROUNDS", "3")?[0];
    let plane = ControlPlane::shared()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let client = runtime.block_on(plane.admin_client())?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(
        repo("target/plugins/pod-counter.wasm"),
        plugins.path().join("pod-counter.wasm"),
    )
    .context("target/plugins/pod-counter.wasm: run `make plugins`")?;
    let target = repo("target");
    for peer in peers().iter().filter(|p| p.native) {
        let binary = (peer.start)(plugins.path(), &target);
        if !Path::new(binary.get_program()).exists() {
            bail!(
                "{:?} is missing: run scripts/build-peers.sh",
                binary.get_program()
            );
        }
    }
    grant_plugin(plane, plugins.path())?;
    runtime.block_on(mark_existing_pods(&client))?;
    println!("peers: {rounds} rounds per burst, client rate {PEER_QPS}/s for every controller");
    for burst in bursts {
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); 3];
        for _ in 0..rounds {
            for (i, peer) in peers().iter().enumerate() {
                let command = (peer.start)(plugins.path(), &target);
                let sample = runtime.block_on(measure(&client, plane, command, burst))?;
                samples[i].push(sample);
            }
        }
        report(burst, &samples);
    }
    Ok(())
}

/// Applies the RBAC `wasm-controller-manager rbac` prints for the plugin (it acts as
/// its own ServiceAccount, as deployed), in the namespace it names.
fn grant_plugin(plane: &ControlPlane, plugins: &Path) -> Result<()> {
    let kubectl = |args: &[&str], input: Option<&[u8]>| -> Result<()> {
        let mut child = Command::new(ControlPlane::kubectl())
            .args(args)
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            std::io::Write::write_all(&mut stdin, bytes)?;
        }
        child.wait()?;
        Ok(())
    };
    kubectl(&["create", "namespace", "wcm-system"], None)?; // or it exists already
    let rbac = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .arg("rbac")
        .arg(plugins)
        .output()?;
    anyhow::ensure!(
        rbac.status.success(),
        "rbac: {}",
        String::from_utf8_lossy(&rbac.stderr)
    );
    kubectl(&["apply", "-f", "-"], Some(&rbac.stdout))
}

/// Marks the cluster's Pods counted, so every controller's work is the burst alone.
async fn mark_existing_pods(client: &Client) -> Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    let unmarked = ListParams::default().labels(&format!("!{COUNTED}"));
    let patch = json!({"metadata": {"labels": {COUNTED: "true"}}});
    for pod in pods.list_metadata(&unmarked).await?.items {
        let (Some(ns), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }
    Ok(())
}

/// One controller, one burst: start it, wait until it has synced, create the Pods,
/// wait for the count and the last Event, read its CPU and RSS, stop it, clean up.
async fn measure(
    client: &Client,
    plane: &ControlPlane,
    mut command: Command,
    n: usize,
) -> Result<Sample> {
    let nodes: Api<Node> = Api::all(client.clone());
    let stale = json!({"metadata": {"labels": {COUNT: "stale"}}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&stale))
        .await?;
    let baseline = Api::<Pod>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len();
    let mut child = command
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let audit = plane.audit_log();
    let result = measure_running(client, &mut child, &audit, n, baseline).await;
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    result
}

async fn measure_running(
    client: &Client,
    child: &mut Child,
    audit: &Path,
    n: usize,
    baseline: usize,
) -> Result<Sample> {
    let pid = child.id();
    until(|| label_is(client, baseline))
        .await
        .context("the controller never synced")?;
    let namespace = format!("bench-{}", std::process::id() ^ rand_suffix());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let cpu_before = cpu_seconds(pid)?;
    let lists_before = api_lists(client).await?;
    let audit_from = std::fs::metadata(audit)?.len();
    let start = Instant::now();
    create_pods(client, &namespace, n).await?;
    until(|| label_is(client, baseline + n))
        .await
        .context("the count never matched")?;
    let converge = start.elapsed().as_secs_f64();
    until(|| counted_events(client, &namespace, n))
        .await
        .context("Events missing")?;
    let last_event = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid)? - cpu_before;
    let rss_mib = peak_rss_mib(pid)?;
    let lists_per_pod = (api_lists(client).await? - lists_before) / n as f64;
    let writes_per_pod = controller_writes(audit, audit_from)? / n as f64;
    delete_namespace(&namespaces, &namespace).await?;
    Ok(Sample {
        converge,
        last_event,
        cpu,
        rss_mib,
        writes_per_pod,
        lists_per_pod,
    })
}

/// Deletes the burst's namespace and waits until it is gone with its Pods.
async fn delete_namespace(namespaces: &Api<Namespace>, name: &str) -> Result<()> {
    namespaces.delete(name, &DeleteParams::default()).await?;
    let gone = until(|| async { namespaces.get_opt(name).await.ok()?.is_none().then_some(()) });
    gone.await.context("the bench namespace was not deleted")
}

fn rand_suffix() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    nanos.map(|d| d.subsec_nanos()).unwrap_or_default()
}

/// Polls `probe` until it answers or [`LIMIT`] passes: every [`POLL`], finer than
/// `wcm_control_plane::poll_until`'s 200 ms because the time it returns at is what the
/// bench reports.
async fn until<F, Fut, T>(mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + LIMIT;
    while Instant::now() < deadline {
        if let Some(v) = probe().await {
            return Some(v);
        }
        tokio::time::sleep(POLL).await;
    }
    None
}

async fn label_is(client: &Client, count: usize) -> Option<()> {
    let node = Api::<Node>::all(client.clone()).get(NODE_NAME).await.ok()?;
    (node.metadata.labels?.get(COUNT)? == &count.to_string()).then_some(())
}

async fn counted_events(client: &Client, namespace: &str, n: usize) -> Option<()> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let counted = ListParams::default().fields("reason=Counted");
    (events.list_metadata(&counted).await.ok()?.items.len() >= n).then_some(())
}

async fn create_pods(client: &Client, namespace: &str, n: usize) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    futures::stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p-{i}")},
                    "spec": {"containers": [{"name": "c", "image": "wcm.local/pause:1"}]},
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CREATORS)
        .try_collect::<()>()
        .await
}

/// User plus system CPU seconds of a process (`/proc/<pid>/stat`, clock ticks of
/// 1/100 s, Linux's USER_HZ).
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_name = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Peak resident memory (`VmHWM`) in MiB.
fn peak_rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("VmHWM")?;
    let kib: f64 = line
        .split_whitespace()
        .nth(1)
        .context("VmHWM value")?
        .parse()?;
    Ok(kib / 1024.0)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A column of the report: its title and what it reads of a sample.
type Column = (&'static str, fn(&Sample) -> f64);

fn report(burst: usize, samples: &[Vec<Sample>]) {
    let peers = peers();
    let metric = |i: usize, f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
    let columns: [Column; 6] = [
        ("converge s", |s| s.converge),
        ("last Event s", |s| s.last_event),
        ("CPU s", |s| s.cpu),
        ("peak RSS MiB", |s| s.rss_mib),
        ("writes/Pod", |s| s.writes_per_pod),
        ("lists/Pod", |s| s.lists_per_pod),
    ];
    println!(
        "\n{burst} Pods (medians of {} rounds; ×: to the fastest native peer)",
        samples[0].len()
    );
    let titles: Vec<String> = columns.iter().map(|(t, _)| format!("{t:>18}")).collect();
    println!("{:40} {}", "controller", titles.join(" "));
    for (i, peer) in peers.iter().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, f)| {
                let value = metric(i, *f);
                let best = (0..peers.len())
                    .filter(|j| peers[*j].native)
                    .map(|j| metric(j, *f))
                    .fold(f64::MAX, f64::min);
                format!("{:>18}", format!("{value:9.2} ({:4.2}×)", value / best))
            })
            .collect();
        println!("{:40} {}", peer.name, cells.join(" "));
    }
}
