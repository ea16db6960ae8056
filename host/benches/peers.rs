//! The host with pod-counter against the same controller written natively with kube-rs
//! and with controller-runtime (`peers/`), one after the other against the same local
//! control plane: for bursts of Pods, the time from the burst's first create to the
//! correct count label, the time to the last `Counted` Event, the controller process's
//! CPU seconds over the burst and those of the API server and etcd serving it, its
//! peak RSS, its API writes per Pod with the median time the API server took over
//! each and the controller between them (the audit log), and lists per Pod (the API
//! server's `apiserver_request_total`); medians of rounds, and ratios to
//! the fastest native peer. Every controller gets the same client rate (`QPS`), so
//! the comparison is of the controllers, not of their default rate limits.
//!
//! `make bench` builds the peers (`scripts/build-peers.sh`) and starts the control
//! plane. `WCM_BENCH_BURSTS` (default `500,2000,10000`) and `WCM_BENCH_ROUNDS`
//! (default 9, 5 and 3 rounds by burst size) choose the work; `WCM_BENCH_PEERS`
//! (default `host,kube-rs,controller-runtime`) which controllers run, e.g. the host
//! alone while profiling it, or `host-shared-identity` (the host writing as itself,
//! granted the plugin's rights, instead of impersonating it) beside `host`. Each
//! controller acts as the ServiceAccount `wasm-controller-manager rbac` makes for it
//! (the native peers as pod-counter's), and the times are when the API server's
//! watches deliver the label and the last Event. The Pods stay Pending (the only node
//! is tainted), so no kubelet work is measured.

mod pod_counting;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use kube::Client;
use pod_counting::audit::{AuditMark, Writes};
use pod_counting::identity::{HOST_ACCOUNT, POD_COUNTER_ACCOUNT, RBAC_NAMESPACE, kubeconfig_as};
use pod_counting::*;
use wcm_control_plane::ControlPlane;

/// One controller under test and how to start it.
struct Peer {
    /// How `WCM_BENCH_PEERS` names it.
    key: &'static str,
    /// Whether it runs when `WCM_BENCH_PEERS` names none.
    by_default: bool,
    name: &'static str,
    native: bool,
    /// The ServiceAccount it acts as, as deployed.
    account: &'static str,
    start: fn(&Path, &Path) -> Command,
}

/// The ClusterRoleBinding granting the host's ServiceAccount pod-counter's rights,
/// for `host-shared-identity`; deleted after the bench.
const SHARED_IDENTITY_BINDING: &str = "bench-host-shared-identity";

fn shared_identity_binding() -> String {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": SHARED_IDENTITY_BINDING},
        // `wasm-controller-manager rbac` names a plugin's ClusterRole as its account.
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": POD_COUNTER_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": HOST_ACCOUNT,
                      "namespace": RBAC_NAMESPACE}],
    })
    .to_string()
}

/// What one round of one burst measured of one controller.
#[derive(Clone, Copy)]
struct Sample {
    converge: f64,
    last_event: f64,
    cpu: f64,
    /// CPU seconds of the API server and etcd over the burst.
    plane_cpu: f64,
    rss_mib: f64,
    /// The controller's writes per Pod of the burst (the API server's audit log).
    writes_per_pod: f64,
    /// Median milliseconds the API server took over one of the controller's writes.
    api_ms: f64,
    /// Median milliseconds the controller took between a write's answer and its next.
    own_ms: f64,
    /// The lists per Pod of the burst (the API server's metrics).
    lists_per_pod: f64,
}

/// Lists the API server has answered so far, not counting Event lists (none of the
/// controllers lists Events). Watches are left out: the API server counts a watch
/// when it ends.
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

fn peers() -> [Peer; 4] {
    [
        Peer {
            key: "host",
            by_default: true,
            name: "wasm-controller-manager + pod-counter",
            native: false,
            account: HOST_ACCOUNT,
            start: |plugins, _| host_command(plugins),
        },
        // What impersonating the plugin costs the API server: the host writing as
        // itself, granted the plugin's rights (`shared_identity_binding`).
        Peer {
            key: "host-shared-identity",
            by_default: false,
            name: "host, --impersonate-plugins=false",
            native: false,
            account: HOST_ACCOUNT,
            start: |plugins, _| {
                let mut c = host_command(plugins);
                c.arg("--impersonate-plugins=false");
                c
            },
        },
        Peer {
            key: "kube-rs",
            by_default: true,
            name: "kube-rs (kube-runtime)",
            native: true,
            account: POD_COUNTER_ACCOUNT,
            start: |_, target| Command::new(target.join("release/kube-rs-pod-counter")),
        },
        Peer {
            key: "controller-runtime",
            by_default: true,
            name: "controller-runtime",
            native: true,
            account: POD_COUNTER_ACCOUNT,
            start: |_, target| {
                controller_runtime_command(&target.join("peers/controller-runtime-pod-counter"))
            },
        },
    ]
}

/// The controllers `WCM_BENCH_PEERS` names (all by default), in the report's order.
fn chosen_peers() -> Result<Vec<Peer>> {
    let all = peers();
    let text = std::env::var("WCM_BENCH_PEERS").unwrap_or_default();
    if text.trim().is_empty() {
        return Ok(all.into_iter().filter(|p| p.by_default).collect());
    }
    let wanted: Vec<&str> = text.split(',').map(str::trim).collect();
    if let Some(unknown) = wanted.iter().find(|w| !all.iter().any(|p| p.key == **w)) {
        let keys: Vec<&str> = all.iter().map(|p| p.key).collect();
        bail!(
            "WCM_BENCH_PEERS: no controller {unknown:?} (known: {})",
            keys.join(", ")
        );
    }
    Ok(all
        .into_iter()
        .filter(|p| wanted.contains(&p.key))
        .collect())
}

fn main() -> Result<()> {
    let bursts = env_list("WCM_BENCH_BURSTS", "500,2000,10000")?;
    let rounds: Option<usize> = std::env::var("WCM_BENCH_ROUNDS")
        .ok()
        .map(|r| r.trim().parse())
        .transpose()
        .context("WCM_BENCH_ROUNDS")?;
    let peers = chosen_peers()?;
    let (plane, runtime, client) = connect()?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(
        repo("target/plugins/pod-counter.wasm"),
        plugins.path().join("pod-counter.wasm"),
    )
    .context("target/plugins/pod-counter.wasm: run `make plugins`")?;
    let target = repo("target");
    for peer in peers.iter().filter(|p| p.native) {
        let binary = (peer.start)(plugins.path(), &target);
        if !Path::new(binary.get_program()).exists() {
            bail!(
                "{:?} is missing: run scripts/build-peers.sh",
                binary.get_program()
            );
        }
    }
    let mut grants = Grants::new(plane);
    grants.grant(plugins.path())?;
    runtime.block_on(mark_existing_pods(&client))?;
    let shared_identity = peers.iter().any(|p| p.key == "host-shared-identity");
    if shared_identity {
        let binding = shared_identity_binding();
        kubectl(plane, &["apply", "-f", "-"], Some(binding.as_bytes()))?;
    }
    let kubeconfigs = peers
        .iter()
        .map(|p| runtime.block_on(kubeconfig_as(plane, p.account, plugins.path())))
        .collect::<Result<Vec<_>>>()?;
    println!("peers: client rate {QPS}/s for every controller, each as its ServiceAccount");
    for burst in bursts {
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
        for _ in 0..rounds.unwrap_or_else(|| default_rounds(burst)) {
            for (i, peer) in peers.iter().enumerate() {
                let command = (peer.start)(plugins.path(), &target);
                let controller = (command, kubeconfigs[i].as_path());
                let sample = runtime.block_on(measure(&client, plane, controller, burst))?;
                samples[i].push(sample);
            }
        }
        report(&peers, burst, &samples);
    }
    if shared_identity {
        let binding = format!("clusterrolebinding/{SHARED_IDENTITY_BINDING}");
        kubectl(plane, &["delete", &binding], None)?;
    }
    Ok(())
}

/// Rounds per burst when `WCM_BENCH_ROUNDS` does not say: a small burst's times
/// are a few hundred milliseconds and swing with where the burst falls in a batch of
/// the controller's work, so it gets more rounds; they are also the cheapest.
fn default_rounds(burst: usize) -> usize {
    match burst {
        0..=500 => 9,
        501..=2000 => 5,
        _ => 3,
    }
}

/// One controller, one burst: start it, wait until it has synced, create the Pods,
/// wait for the count and the last Event, read its CPU and RSS, stop it, clean up.
async fn measure(
    client: &Client,
    plane: &ControlPlane,
    (command, kubeconfig): (Command, &Path),
    n: usize,
) -> Result<Sample> {
    let baseline = stale_count(client).await?;
    let child = spawn(kubeconfig, command)?;
    let audit = plane.audit_log();
    let result = measure_running(client, (plane, child.id()), &audit, n, baseline).await;
    stop(child);
    result
}

async fn measure_running(
    client: &Client,
    (plane, pid): (&ControlPlane, u32),
    audit: &Path,
    n: usize,
    baseline: usize,
) -> Result<Sample> {
    until(|| label_is(client, baseline))
        .await
        .context("the controller never synced")?;
    let (namespaces, namespace) = burst_namespace(client, "bench").await?;
    let cpu_before = cpu_seconds(pid)?;
    let plane_cpu_before = control_plane_cpu_seconds(plane)?;
    let lists_before = api_lists(client).await?;
    let audit_from = AuditMark::now(audit)?;
    let label = arrival::label_reaches(client, baseline + n);
    let events = arrival::events_reach(client, &namespace, n);
    let start = Instant::now();
    create_pods(client, &namespace, n).await?;
    let converged = label.await?.context("the count never matched")?;
    let last_event = events.await?.context("Events missing")?;
    let converge = converged.duration_since(start).as_secs_f64();
    let last_event = last_event.duration_since(start).as_secs_f64();
    let cpu = cpu_seconds(pid)? - cpu_before;
    let plane_cpu = control_plane_cpu_seconds(plane)? - plane_cpu_before;
    let rss_mib = peak_rss_mib(pid)?;
    let lists_per_pod = (api_lists(client).await? - lists_before) / n as f64;
    let writes = Writes::since(audit, &audit_from)?;
    delete_namespace(&namespaces, &namespace).await?;
    Ok(Sample {
        converge,
        last_event,
        cpu,
        plane_cpu,
        rss_mib,
        writes_per_pod: writes.count() as f64 / n as f64,
        api_ms: writes.api_ms(),
        own_ms: writes.own_ms(),
        lists_per_pod,
    })
}

/// A column of the report: its title and what it reads of a sample.
type Column = (&'static str, fn(&Sample) -> f64);

fn report(peers: &[Peer], burst: usize, samples: &[Vec<Sample>]) {
    let metric = |i: usize, f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
    let columns: [Column; 9] = [
        ("converge s", |s| s.converge),
        ("last Event s", |s| s.last_event),
        ("CPU s", |s| s.cpu),
        ("API server CPU s", |s| s.plane_cpu),
        ("peak RSS MiB", |s| s.rss_mib),
        ("writes/Pod", |s| s.writes_per_pod),
        ("API ms/write", |s| s.api_ms),
        ("own ms/write", |s| s.own_ms),
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
                    .reduce(f64::min);
                let ratio = best.map_or("  – ".into(), |b| format!("{:4.2}", value / b));
                format!("{:>18}", format!("{value:9.2} ({ratio}×)"))
            })
            .collect();
        println!("{:40} {}", peer.name, cells.join(" "));
    }
    paired(peers, samples, "CPU s", |s| s.cpu);
    paired(peers, samples, "last Event s", |s| s.last_event);
}

/// Each round's value of `f` for every controller, and its ratio to the fastest
/// native peer of the same round, with the median of those ratios. Rounds are
/// interleaved, so a round's ratio compares controllers under the same pace of the
/// API server, which moves between rounds and runs far more than the controllers
/// differ (docs/benchmarks.md).
fn paired(peers: &[Peer], samples: &[Vec<Sample>], title: &str, f: fn(&Sample) -> f64) {
    let rounds = samples.iter().map(Vec::len).min().unwrap_or(0);
    let best = |round: usize| {
        (0..peers.len())
            .filter(|j| peers[*j].native)
            .map(|j| f(&samples[j][round]))
            .reduce(f64::min)
    };
    println!("{title} by round (ratio to that round's fastest native peer):");
    for (i, peer) in peers.iter().enumerate() {
        let mut ratios = Vec::new();
        let cells: Vec<String> = (0..rounds)
            .map(|round| {
                let value = f(&samples[i][round]);
                match best(round) {
                    Some(b) => {
                        ratios.push(value / b);
                        format!("{value:.2} ({:.2}×)", value / b)
                    }
                    None => format!("{value:.2}"),
                }
            })
            .collect();
        let median_ratio = match ratios.is_empty() {
            true => String::new(),
            false => format!("  median ratio {:.2}×", median(ratios)),
        };
        println!("  {:38} {}{median_ratio}", peer.name, cells.join("  "));
    }
}
