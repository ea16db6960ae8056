//! What the benches that run pod-counter against a real control plane share: the
//! plugin's labels, starting and stopping controllers (the host, the native peers),
//! granting plugins their RBAC, bursts of Pods in a namespace of their own, waiting
//! for the count and the Events, and reading a process's CPU and memory from `/proc`.

#![allow(dead_code)] // each bench uses its own part

pub mod arrival;
pub mod audit;
pub mod identity;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wcm_control_plane::{ControlPlane, NODE_NAME};

use identity::RBAC_NAMESPACE;

/// The client rate every controller gets (requests per second and burst), so a
/// comparison is of the controllers, not of their default rate limits.
pub const QPS: u32 = 1000;
pub const COUNT: &str = "pod-counter.example.com/count";
pub const COUNTED: &str = "pod-counter.example.com/counted";
/// Pods created at once by a burst.
pub const CREATORS: usize = 64;
pub const POLL: Duration = Duration::from_millis(100);
pub const LIMIT: Duration = Duration::from_secs(600);

/// A path in the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// A comma-separated list of numbers from the environment variable `name`.
pub fn env_list(name: &str, default: &str) -> Result<Vec<usize>> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    (text.split(',').map(|n| n.trim().parse::<usize>()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("{name}={text}"))
}

/// Sets the Node's count label to `stale` and returns how many Pods there are: a
/// controller has synced once it writes that count.
pub async fn stale_count(client: &Client) -> Result<usize> {
    let nodes: Api<Node> = Api::all(client.clone());
    let stale = json!({"metadata": {"labels": {COUNT: "stale"}}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&stale))
        .await?;
    let pods = Api::<Pod>::all(client.clone());
    Ok(pods
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len())
}

/// The shared control plane, a runtime to drive it and an admin client.
pub fn connect() -> Result<(&'static ControlPlane, tokio::runtime::Runtime, Client)> {
    let plane = ControlPlane::shared()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let client = runtime.block_on(plane.admin_client())?;
    Ok((plane, runtime, client))
}

/// The host running the plugins in `plugins`, at [`QPS`]: this build's, or the one
/// `WCM_BENCH_HOST` names (another build, to compare side by side on one control plane).
pub fn host_command(plugins: &Path) -> Command {
    let host = std::env::var_os("WCM_BENCH_HOST");
    let host = host.unwrap_or_else(|| env!("CARGO_BIN_EXE_wasm-controller-manager").into());
    let mut c = Command::new(host);
    let qps = QPS.to_string();
    c.arg("run").arg("--plugins-dir").arg(plugins);
    // Everything of the host's in the benches' namespace, where `Grants` put its and
    // the plugins' ServiceAccounts.
    for flag in [
        "--plugin-service-account-namespace",
        "--leader-elect-resource-namespace",
        "--wasm-plugin-namespace",
    ] {
        c.args([flag, RBAC_NAMESPACE]);
    }
    c.args(["--metrics-bind-address", "127.0.0.1:0"]);
    c.args(["--plugin-api-qps", &qps, "--plugin-api-burst", &qps]);
    c
}

/// The controller-runtime peer at `binary`, at [`QPS`].
pub fn controller_runtime_command(binary: &Path) -> Command {
    let mut c = Command::new(binary);
    let qps = QPS.to_string();
    c.args(["-qps", &qps, "-burst", &qps]);
    c
}

/// Starts a controller with `kubeconfig` (see [`identity`]), quietly.
pub fn spawn(kubeconfig: &Path, mut command: Command) -> Result<Child> {
    let child = command
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(child)
}

/// Starts `command` with `kubeconfig` and info logs, with its log lines (standard
/// error) on a channel, read on a thread of their own so it never blocks on them.
pub fn spawn_logging(
    kubeconfig: &Path,
    mut command: Command,
) -> Result<(Child, mpsc::Receiver<String>)> {
    let mut child = command
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let (lines, seen) = mpsc::channel();
    let stderr = child.stderr.take().context("stderr")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    Ok((child, seen))
}

/// Stops a controller (SIGTERM) and waits for it.
pub fn stop(mut child: Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

/// `kubectl ARGS` against `plane` as its admin, with `input` on its stdin.
pub fn kubectl(plane: &ControlPlane, args: &[&str], input: Option<&[u8]>) -> Result<ExitStatus> {
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
    Ok(child.wait()?)
}

/// The RBAC the benches applied, deleted again when dropped — the ServiceAccounts,
/// their roles and bindings, and the benches' own namespace ([`RBAC_NAMESPACE`]) with
/// what is in it — so a `make test` or a deployed host on the same cluster later finds
/// none of them (a bench once left `wcm-system` and its ClusterRoles behind, and the
/// chart's documented install then failed on them).
pub struct Grants {
    plane: &'static ControlPlane,
    /// Each manifest applied, in order.
    applied: Vec<Vec<u8>>,
}

impl Grants {
    /// Nothing granted yet on `plane`.
    pub fn new(plane: &'static ControlPlane) -> Grants {
        Grants {
            plane,
            applied: Vec::new(),
        }
    }

    /// Applies the RBAC `wasm-controller-manager rbac` prints for the plugins in
    /// `plugins` (each acts as its own ServiceAccount, as deployed; it brings the
    /// namespace), then the host's ServiceAccount of `deploy/` it binds to.
    pub fn grant(&mut self, plugins: &Path) -> Result<()> {
        let rbac = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
            .args(["rbac", "--namespace", RBAC_NAMESPACE])
            .arg(plugins)
            .output()?;
        anyhow::ensure!(
            rbac.status.success(),
            "rbac: {}",
            String::from_utf8_lossy(&rbac.stderr)
        );
        let applied = kubectl(self.plane, &["apply", "-f", "-"], Some(&rbac.stdout))?;
        self.applied.push(rbac.stdout);
        anyhow::ensure!(
            applied.success(),
            "kubectl apply of the plugins' RBAC failed"
        );
        let host_account = repo("deploy/host/serviceaccount.yaml");
        let host_account = host_account.to_str().context("deploy/ path")?;
        let applied = kubectl(
            self.plane,
            &["apply", "-n", RBAC_NAMESPACE, "-f", host_account],
            None,
        )?;
        anyhow::ensure!(applied.success(), "kubectl apply of {host_account} failed");
        Ok(())
    }
}

impl Drop for Grants {
    fn drop(&mut self) {
        let delete = ["delete", "--ignore-not-found", "--wait=false", "-f", "-"];
        for manifest in self.applied.iter().rev() {
            if !matches!(kubectl(self.plane, &delete, Some(manifest)), Ok(s) if s.success()) {
                eprintln!("could not delete the benches' RBAC ({RBAC_NAMESPACE} and its roles)");
            }
        }
    }
}

/// A new namespace for one burst, named `<prefix>-<random>`.
pub async fn burst_namespace(client: &Client, prefix: &str) -> Result<(Api<Namespace>, String)> {
    let name = format!("{prefix}-{}", std::process::id() ^ rand_suffix());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    Ok((namespaces, name))
}

/// Marks the cluster's Pods counted, so every controller's work is the burst alone.
pub async fn mark_existing_pods(client: &Client) -> Result<()> {
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

/// Deletes the burst's namespace and waits until it is gone with its Pods.
pub async fn delete_namespace(namespaces: &Api<Namespace>, name: &str) -> Result<()> {
    namespaces.delete(name, &DeleteParams::default()).await?;
    let gone = until(|| async { namespaces.get_opt(name).await.ok()?.is_none().then_some(()) });
    gone.await.context("the bench namespace was not deleted")
}

pub fn rand_suffix() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    nanos.map(|d| d.subsec_nanos()).unwrap_or_default()
}

/// Polls `probe` until it answers or [`LIMIT`] passes, every [`POLL`]. For waits
/// whose end is not measured; [`arrival`] times what is.
pub async fn until<F, Fut, T>(mut probe: F) -> Option<T>
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

pub async fn label_is(client: &Client, count: usize) -> Option<()> {
    let node = Api::<Node>::all(client.clone()).get(NODE_NAME).await.ok()?;
    (node.metadata.labels?.get(COUNT)? == &count.to_string()).then_some(())
}

pub async fn create_pods(client: &Client, namespace: &str, n: usize) -> Result<()> {
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
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_name = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// CPU seconds the API server and etcd of `plane` have used so far: what serving a
/// controller's requests and watches costs the control plane.
pub fn control_plane_cpu_seconds(plane: &ControlPlane) -> Result<f64> {
    let mut total = 0.0;
    for component in ["kube-apiserver", "etcd"] {
        let file = plane.state_dir().join(format!("{component}.pid"));
        let pid = std::fs::read_to_string(&file).with_context(|| format!("{file:?}"))?;
        total += cpu_seconds(pid.trim().parse()?)?;
    }
    Ok(total)
}

/// Peak resident memory (`VmHWM`) in MiB.
pub fn peak_rss_mib(pid: u32) -> Result<f64> {
    proc_status_mib(pid, "VmHWM:")
}

/// A memory line of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`, in KiB) in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line =
        (status.lines().find(|l| l.starts_with(field))).with_context(|| field.to_string())?;
    let kib: f64 = (line.split_whitespace().nth(1))
        .with_context(|| format!("{field} value"))?
        .parse()?;
    Ok(kib / 1024.0)
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
