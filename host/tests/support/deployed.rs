//! The host deployed in the local cluster by `scripts/deploy.sh`: running the script,
//! its Pods, the Pod holding the Lease, and what to print when a scenario fails.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use wcm_control_plane::{ControlPlane, NODE_NAME, poll_until};

use super::{http_get, kubectl};

/// The namespace, Deployment and Lease name of `deploy/`.
pub const NAMESPACE: &str = "wcm-system";
pub const NAME: &str = "wasm-controller-manager";

/// The shared control plane, which must run a node to deploy on, and its admin client.
pub async fn plane_with_node() -> Result<(&'static ControlPlane, Client)> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    Ok((plane, plane.admin_client().await?))
}

/// Runs `scripts/deploy.sh` with this test build's host binary, `args` (plugin files
/// or `--plugin-image REF`) and the overlay in `overlay`; waits for the rollout.
pub fn deploy(plane: &ControlPlane, overlay: &Path, args: &[&str]) -> Result<()> {
    let binary = env!("CARGO_BIN_EXE_wasm-controller-manager");
    deploy_binary(plane, overlay, binary, args)
}

/// [`deploy`] with the host binary `binary`.
pub fn deploy_binary(
    plane: &ControlPlane,
    overlay: &Path,
    binary: &str,
    args: &[&str],
) -> Result<()> {
    namespace_gone_or_live(plane)?;
    let out = script(plane, "deploy.sh")
        .args(["--binary", binary])
        .arg("--overlay")
        .arg(overlay)
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "deploy.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Waits until [`NAMESPACE`] is not being deleted: [`undeploy`] does not wait for
/// the previous scenario's namespace to go, and one still terminating refuses what
/// the next deploys into it.
pub fn namespace_gone_or_live(plane: &ControlPlane) -> Result<()> {
    let phase = ["get", "namespace", NAMESPACE, "--ignore-not-found"];
    let phase = [&phase[..], &["-o", "jsonpath={.status.phase}"]].concat();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while kubectl(plane, &phase)?.trim() == "Terminating" {
        ensure!(
            std::time::Instant::now() < deadline,
            "{NAMESPACE} still terminating after 3 minutes"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    Ok(())
}

/// Deletes what `overlay` deployed but the WasmPlugin CRD, with the command
/// docs/deploying.md gives: the CRD is shared by the whole cluster, and deleting it
/// would delete every `WasmPlugin` of the tests running beside this one (`kubectl
/// delete -k` once did).
pub fn undeploy(plane: &ControlPlane, overlay: &Path) -> Result<()> {
    let delete = ["delete", "-k"].map(OsStr::new);
    let keep = [
        "-l",
        "!wasm-controller-manager.io/crd",
        "--ignore-not-found",
        "--wait=false",
    ];
    let keep = keep.map(OsStr::new);
    kubectl(
        plane,
        &[&delete[..], &[overlay.as_os_str()], &keep[..]].concat(),
    )?;
    let crd = [
        "get",
        "crd",
        "wasmplugins.wasm-controller-manager.io",
        "-o",
        "name",
    ];
    ensure!(
        !kubectl(plane, &crd)?.trim().is_empty(),
        "the documented removal deleted the WasmPlugin CRD"
    );
    Ok(())
}

/// Runs `scripts/plugin-image.sh` on `plugins`; returns the image reference.
pub fn plugin_image(plane: &ControlPlane, plugins: &[&Path]) -> Result<String> {
    let args: Vec<&OsStr> = plugins.iter().map(|p| p.as_os_str()).collect();
    last_line(&run_script(plane, "plugin-image.sh", &args)?)
}

/// The host's image built by `scripts/image.sh` from `binary` and imported into the
/// local node, pinned to its digest.
pub fn local_image(plane: &ControlPlane, binary: &str) -> Result<String> {
    let image = last_line(&run_script(plane, "image.sh", &["--binary", binary])?)?;
    ensure!(
        image.contains("@sha256:"),
        "not pinned to a digest: {image}"
    );
    Ok(image)
}

/// What `scripts/NAME ARGS...` printed, run against `plane`; an error with what it
/// said otherwise.
pub fn run_script<S: AsRef<OsStr>>(plane: &ControlPlane, name: &str, args: &[S]) -> Result<String> {
    let out = script(plane, name).args(args).output()?;
    ensure!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

fn last_line(text: &str) -> Result<String> {
    Ok(text.lines().last().context("printed nothing")?.to_string())
}

fn script(plane: &ControlPlane, name: &str) -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let kubeconfig = plane.admin_kubeconfig();
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts").join(name))
        .current_dir(&root)
        .env("KUBECONFIG", kubeconfig)
        .env("WCM_CLUSTER_DIR", kubeconfig.parent().unwrap_or(&root));
    command
}

/// The host's Pods that are Ready and not being deleted.
pub async fn ready_pods(client: &Client) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let listed = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=wasm-controller-manager"))
        .await?;
    Ok(listed.items.into_iter().filter(is_ready).collect())
}

/// The `n` ready host Pods, once there are `n` (within `within`): a Deployment is
/// available, and `helm install --wait` returns, before every replica is ready.
pub async fn ready_replicas(
    client: &Client,
    n: usize,
    within: std::time::Duration,
) -> Result<Vec<Pod>> {
    let ready = poll_until(within, || async {
        let pods = ready_pods(client).await.ok()?;
        (pods.len() == n).then_some(pods)
    })
    .await;
    let found = ready_pods(client)
        .await
        .map(|p| p.len())
        .unwrap_or_default();
    ready.with_context(|| format!("{found} ready host Pods, not {n}"))
}

pub fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        && pod.metadata.deletion_timestamp.is_none()
}

pub async fn lease(client: &Client) -> Result<Lease> {
    Ok(Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(NAME)
        .await?)
}

/// The Pod of `pods` that holds the Lease, if one does.
pub async fn leader(client: &Client, pods: &[Pod]) -> Option<Pod> {
    let holder = lease(client).await.ok()?.spec?.holder_identity?;
    pods.iter().find(|p| holds(p, &holder)).cloned()
}

/// Whether `holder` (a Lease's holderIdentity: the Pod's name) is `pod`.
pub fn holds(pod: &Pod, holder: &str) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    !name.is_empty() && holder == name
}

/// The Lease, the last log lines of every host Pod and what is known of the Pods and
/// the node ([`wcm_control_plane::describe_pods`]), for a failure message.
pub async fn diagnosis(client: &Client) -> String {
    let lease = lease(client).await.map(|l| l.spec);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut said = vec![format!("lease {lease:?}")];
    let listed = pods.list(&ListParams::default()).await;
    for pod in listed.map(|l| l.items).unwrap_or_default() {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let logs = pods
            .logs(&name, &Default::default())
            .await
            .unwrap_or_default();
        let tail: Vec<&str> = logs.lines().rev().take(8).collect();
        let phase = pod.status.and_then(|s| s.phase);
        said.push(format!("{name} ({phase:?}): {tail:#?}"));
    }
    said.push(wcm_control_plane::describe_pods(client, NAMESPACE).await);
    said.join("\n")
}

/// pod-counter's label on the node: the count of Pods it last wrote.
pub const COUNT: &str = "pod-counter.example.com/count";
/// How long the cluster may take to settle: earlier tests' Pods going, pod-counter
/// counting the Pods there are.
const SETTLED_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

/// pod-counter's count on the node, if it wrote one.
pub async fn node_count(client: &Client) -> Option<String> {
    let node = Api::<Node>::all(client.clone()).get(NODE_NAME).await.ok()?;
    node.metadata.labels?.get(COUNT).cloned()
}

/// pod-counter, in the cluster, counts every Pod, its own host's included; the
/// leader's metrics, scraped on its Pod IP, show its reconciles.
pub async fn counts_pods_and_shows_metrics(client: &Client, leader: &Pod) -> Result<()> {
    let all: Api<Pod> = Api::all(client.clone());
    let counted = poll_until(SETTLED_WITHIN, || async {
        let total = all.list(&ListParams::default()).await.ok()?.items.len();
        (node_count(client).await? == total.to_string()).then_some(total)
    })
    .await
    .context("the node's count never matched the cluster's Pods")?;
    ensure!(counted >= 2);
    let ip = leader
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("no Pod IP")?;
    let metrics = http_get(&format!("{ip}:8080"), "/metrics").await?;
    ensure!(
        metrics.contains(r#"controller_runtime_reconcile_total{controller="pod-counter""#),
        "the leader's metrics have no reconciles"
    );
    ensure!(metrics.contains(r#"leader_election_master_status{name="wasm-controller-manager"} 1"#));
    Ok(())
}

/// Waits until the cluster holds fewer than 100 Pods: pod-counter marks every Pod at
/// its API rate (20/s), so earlier tests' Pods go first and a scenario is about the
/// deployment, not a backlog.
pub async fn earlier_pods_gone(client: &Client) -> Result<()> {
    let all: Api<Pod> = Api::all(client.clone());
    let quiet = poll_until(SETTLED_WITHIN, || async {
        let pods = all.list(&ListParams::default()).await.ok()?.items.len();
        (pods < 100).then_some(())
    })
    .await;
    quiet.context("earlier tests' Pods are still there")?;
    Ok(())
}

/// The WasmPlugin CRD's name.
pub const CRD: &str = "wasmplugins.wasm-controller-manager.io";

/// The image the host's Deployment runs.
pub fn deployed_image(plane: &ControlPlane) -> Result<String> {
    let path = "jsonpath={.spec.template.spec.containers[0].image}";
    let args = [
        "-n",
        NAMESPACE,
        "get",
        "deployment/wasm-controller-manager",
        "-o",
        path,
    ];
    Ok(kubectl(plane, &args)?.trim().to_string())
}

/// This test's host binary with a section of its own added: the same version, a
/// different content, as a rebuild of one commit with other flags or toolchain gives.
pub fn rebuilt_binary(dir: &Path) -> Result<std::path::PathBuf> {
    let marker = dir.join("rebuild-marker");
    std::fs::write(&marker, format!("{}", fastrand::u64(..)))?;
    let rebuilt = dir.join("wasm-controller-manager-rebuilt");
    let section = format!(".wcm-rebuild={}", marker.display());
    let out = std::process::Command::new("objcopy")
        .args([
            "--add-section",
            &section,
            env!("CARGO_BIN_EXE_wasm-controller-manager"),
        ])
        .arg(&rebuilt)
        .output()?;
    ensure!(
        out.status.success(),
        "objcopy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(rebuilt)
}

/// The digests every ready host Pod's containers run (`status.containerStatuses`).
pub async fn running_digests(client: &Client) -> Result<Vec<String>> {
    let mut digests = Vec::new();
    for pod in ready_pods(client).await? {
        let status = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        digests.extend(
            status
                .iter()
                .filter_map(|c| c.image_id.rsplit_once('@'))
                .map(|(_, d)| d.to_string()),
        );
    }
    Ok(digests)
}

/// Makes the cluster's WasmPlugin CRD older than the checkout's: without the bound on
/// `spec.settings`, as a CRD of an earlier release had it.
pub fn make_crd_older(plane: &ControlPlane) -> Result<()> {
    let older = format!(r#"[{{"op": "remove", "path": "{SETTINGS_BOUND}"}}]"#);
    kubectl(plane, &["patch", "crd", CRD, "--type=json", "-p", &older])?;
    Ok(())
}

/// Whether the cluster's WasmPlugin CRD is the checkout's again (its settings bound).
pub fn crd_is_current(plane: &ControlPlane) -> Result<bool> {
    let path = SETTINGS_BOUND
        .trim_start_matches('/')
        .replace('/', ".")
        .replace("versions.0", "versions[0]");
    let got = kubectl(
        plane,
        &["get", "crd", CRD, "-o", &format!("jsonpath={{.{path}}}")],
    )?;
    Ok(got.trim() == "256")
}

/// Where the CRD bounds a `WasmPlugin`'s settings.
const SETTINGS_BOUND: &str =
    "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/settings/maxProperties";
