//! Host replicas electing a leader while running pod-counter: a scene of its own
//! namespace, control-plane Node and Lease, the replicas' identities, and readings of
//! the Lease, the Node's label and the Counted Events.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::future::try_join_all;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use kube::{Api, Client};
use wcm_control_plane::{ControlPlane, TestNamespace};

use super::audit::{Write, writes_by};
use super::objects::{all_pods, create_node, create_pod, events_about, node_label};
use super::{HostProcess, eventually, plugin_bytes, plugins_dir};

pub const COUNT: &str = "pod-counter.example.com/count";
pub const COUNTED: &str = "pod-counter.example.com/counted";
pub const LEASE: Duration = Duration::from_secs(4);
pub const RETRY: Duration = Duration::from_millis(500);
/// Time for one request and the process scheduling around it, on a loaded machine.
pub const SLACK: Duration = Duration::from_millis(300);
pub const CONVERGE: Duration = Duration::from_secs(60);

/// Lease duration, renew deadline and retry period of a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease: Duration,
    pub renew: Duration,
    pub retry: Duration,
}

/// The short timings of the scenarios.
pub const SHORT: Timings = Timings {
    lease: LEASE,
    renew: Duration::from_millis(2500),
    retry: RETRY,
};

/// The timings of the hand-over scenarios, which check that a plugin moves by
/// release, never by expiry, and time no take-over: a renew deadline that outlasts
/// a stall of the API server on a loaded machine (CI once saw a renewal time out
/// three seconds into a run; a holder that misses its renew deadline rightly lets
/// the Lease expire, which is not what these scenarios look at).
pub const HANDOVER: Timings = Timings {
    lease: Duration::from_secs(10),
    renew: Duration::from_secs(8),
    retry: RETRY,
};

/// kube-controller-manager's defaults.
pub const DEFAULT: Timings = Timings {
    lease: Duration::from_secs(15),
    renew: Duration::from_secs(10),
    retry: Duration::from_secs(2),
};

/// `--leader-elect` with `timings`, the Lease `name` in the namespace `name`.
pub fn flags(timings: Timings, name: &str) -> Vec<String> {
    let Timings {
        lease,
        renew,
        retry,
    } = timings;
    vec![
        "--leader-elect".to_string(),
        format!("--leader-elect-lease-duration={}ms", lease.as_millis()),
        format!("--leader-elect-renew-deadline={}ms", renew.as_millis()),
        format!("--leader-elect-retry-period={}ms", retry.as_millis()),
        format!("--leader-elect-resource-name={name}"),
        format!("--leader-elect-resource-namespace={name}"),
    ]
}

/// The flags of a replica named `identity` in per-plugin mode with the short
/// timings, its Leases in the namespace `ns`.
pub fn per_plugin_flags(ns: &str, identity: &str) -> Vec<String> {
    per_plugin_flags_with(SHORT, ns, identity)
}

/// The flags of a replica named `identity` in per-plugin mode with `timings`.
fn per_plugin_flags_with(timings: Timings, ns: &str, identity: &str) -> Vec<String> {
    let mut flags = flags(timings, ns);
    flags.push("--leader-elect-mode=per-plugin".to_string());
    flags.push(format!("--leader-elect-identity={identity}"));
    flags
}

/// A replica named `identity` in per-plugin mode, its Leases in `ns`.
pub fn per_plugin_replica(
    ns: &TestNamespace,
    dir: &std::path::Path,
    identity: &str,
) -> Result<HostProcess> {
    per_plugin_replica_with(SHORT, ns, dir, identity)
}

/// A replica named `identity` in per-plugin mode with `timings`, its Leases in `ns`.
pub fn per_plugin_replica_with(
    timings: Timings,
    ns: &TestNamespace,
    dir: &std::path::Path,
    identity: &str,
) -> Result<HostProcess> {
    let flags = per_plugin_flags_with(timings, ns.name(), identity);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    HostProcess::start(dir, &flags)
}

/// Each plugin's Lease holder (empty when released), from the labelled Leases.
pub async fn plugin_holders(
    client: &Client,
    ns: &str,
) -> Result<BTreeMap<String, (String, Lease)>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let leases = api
        .list(&ListParams::default().labels("wasm-controller-manager.io/plugin"))
        .await?;
    let mut holders = BTreeMap::new();
    for lease in leases {
        let labels = lease.metadata.labels.clone().unwrap_or_default();
        let plugin = labels["wasm-controller-manager.io/plugin"].clone();
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
        holders.insert(plugin, (holder.unwrap_or_default(), lease));
    }
    Ok(holders)
}

/// A namespace, its control-plane Node, pod-counter in a plugins directory, and a
/// Lease of the scenario's own.
pub struct Scene {
    pub ns: TestNamespace,
    pub node: String,
    pub dir: tempfile::TempDir,
    pub timings: Timings,
    /// More flags for every replica.
    pub extra: Vec<String>,
}

/// One host process and its identity in the Lease.
pub struct Replica {
    pub host: HostProcess,
    pub identity: String,
}

impl Scene {
    pub async fn new(prefix: &str) -> Result<Scene> {
        let ns = TestNamespace::create(prefix).await?;
        let node = format!("{}-control-plane", ns.name());
        create_node(&ns.client(), &node, true, ns.labels()).await?;
        let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
        Ok(Scene {
            ns,
            node,
            dir,
            timings: SHORT,
            extra: Vec::new(),
        })
    }

    pub fn client(&self) -> Client {
        self.ns.client()
    }

    pub fn flags(&self) -> Vec<String> {
        let mut flags = flags(self.timings, self.ns.name());
        flags.extend(self.extra.iter().cloned());
        flags
    }

    /// Starts a host against the control plane (through `kubeconfig` if given).
    pub async fn replica(&self, kubeconfig: Option<&std::path::Path>) -> Result<Replica> {
        let cp = ControlPlane::shared()?;
        let flags = self.flags();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let kubeconfig = kubeconfig.unwrap_or(cp.admin_kubeconfig());
        let host = HostProcess::start_with(kubeconfig, self.dir.path(), &flags)?;
        let campaigning = ["leader election on; campaigning"];
        let identity = host.log_field(&campaigning, "identity", CONVERGE).await?;
        Ok(Replica { host, identity })
    }

    /// Starts the first replica and waits until it leads, then a second that follows.
    pub async fn leader_and_standby(&self) -> Result<(Replica, Replica)> {
        let a = self.replica(None).await?;
        a.host.wait_for_log(&["became leader"], CONVERGE).await?;
        let b = self.replica(None).await?;
        b.host
            .wait_for_log(&["lease holder changed", &a.identity], CONVERGE)
            .await?;
        Ok((a, b))
    }

    pub async fn lease(&self) -> Result<Lease> {
        let api: Api<Lease> = Api::namespaced(self.client(), self.ns.name());
        Ok(api.get(self.ns.name()).await?)
    }

    /// Waits for the leader's next renewal and returns its `renewTime`.
    pub async fn next_renewal(&self) -> Result<Timestamp> {
        let before = renew_time(&self.lease().await?);
        let renewed = eventually(Duration::from_secs(5), || async {
            let now = renew_time(&self.lease().await.ok()?);
            (now != before).then_some(now).flatten()
        })
        .await;
        renewed.context("the leader did not renew within 5 s")
    }

    pub async fn create_pods(&self, prefix: &str, count: usize) -> Result<Vec<String>> {
        let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
        let client = self.client();
        try_join_all(names.iter().map(|n| create_pod(&client, self.ns.name(), n))).await?;
        Ok(names)
    }

    /// Waits until the Node's label equals the cluster's Pod count and every Pod of
    /// `names` is marked counted; returns the Counted Events of each Pod.
    pub async fn counted(&self, names: &[String]) -> Result<Vec<Vec<String>>> {
        let client = self.client();
        let done = eventually(CONVERGE, || async {
            let pods = all_pods(&client).await.ok()?;
            let label = node_label(&client, &self.node, COUNT).await.ok()??;
            let marked = pods.iter().filter(|p| {
                p.metadata.namespace.as_deref() == Some(self.ns.name())
                    && p.metadata.name.as_ref().is_some_and(|n| names.contains(n))
                    && p.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(COUNTED))
            });
            (label == pods.len().to_string() && marked.count() == names.len()).then_some(())
        })
        .await;
        let label = node_label(&client, &self.node, COUNT).await?;
        done.with_context(|| format!("not converged; label {label:?}"))?;
        let mut reporters = Vec::new();
        for name in names {
            let events = events_about(&client, self.ns.name(), name, "Counted").await?;
            reporters.push(
                events
                    .iter()
                    .map(|e| e.reporting_instance.clone().unwrap_or_default())
                    .collect(),
            );
        }
        Ok(reporters)
    }

    pub fn writes_by(&self, replica: &Replica) -> Result<Vec<Write>> {
        writes_by(&ControlPlane::shared()?.audit_log(), &replica.identity)
    }
}

pub fn renew_time(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

pub fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

pub fn acquire_time(lease: &Lease) -> Result<Timestamp> {
    let spec = lease.spec.as_ref().context("no spec")?;
    Ok(spec.acquire_time.as_ref().context("no acquireTime")?.0)
}

pub fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

pub fn between(from: Timestamp, to: Timestamp) -> Duration {
    let d: SignedDuration = to.duration_since(from);
    d.try_into().unwrap_or(Duration::ZERO)
}

/// Every Pod has exactly one Counted Event, reported by `identity`.
pub fn all_counted_once_by(reporters: &[Vec<String>], identity: &str) -> Result<()> {
    for (i, events) in reporters.iter().enumerate() {
        ensure!(
            events.len() == 1 && events[0] == identity,
            "Pod {i}: Counted Events reported by {events:?}, expected once by {identity}"
        );
    }
    Ok(())
}
