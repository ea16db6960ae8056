//! The host deployed in the local cluster by `scripts/deploy.sh`: running the script,
//! its Pods, the Pod holding the Lease, and what to print when a scenario fails.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};
use wcm_control_plane::ControlPlane;

use super::kubectl;

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
    namespace_gone_or_live(plane)?;
    let out = script(plane, "deploy.sh")
        .args(["--binary", env!("CARGO_BIN_EXE_wasm-controller-manager")])
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
fn namespace_gone_or_live(plane: &ControlPlane) -> Result<()> {
    let phase = ["get", "namespace", NAMESPACE, "--ignore-not-found"];
    let phase = [&phase[..], &["-o", "jsonpath={.status.phase}"]].concat();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while super::kubectl(plane, &phase)?.trim() == "Terminating" {
        ensure!(
            std::time::Instant::now() < deadline,
            "{NAMESPACE} still terminating after 3 minutes"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    Ok(())
}

/// Deletes what `overlay` deployed, except its CustomResourceDefinitions: the
/// WasmPlugin CRD is shared by the whole cluster, and deleting it would delete every
/// `WasmPlugin` of the tests running beside this one (`kubectl delete -k` once did).
pub fn undeploy(plane: &ControlPlane, overlay: &Path) -> Result<()> {
    let rendered = kubectl(plane, &[OsStr::new("kustomize"), overlay.as_os_str()])?;
    let kept: Vec<&str> = rendered
        .split("\n---\n")
        .filter(|doc| !doc.contains("\nkind: CustomResourceDefinition\n"))
        .collect();
    ensure!(
        kept.len() < rendered.split("\n---\n").count(),
        "no CRD in {rendered}"
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), kept.join("\n---\n"))?;
    let delete = ["delete", "--ignore-not-found", "--wait=false", "-f"].map(OsStr::new);
    kubectl(plane, &[&delete[..], &[file.path().as_os_str()]].concat())?;
    Ok(())
}

/// Runs `scripts/plugin-image.sh` on `plugins`; returns the image reference.
pub fn plugin_image(plane: &ControlPlane, plugins: &[&Path]) -> Result<String> {
    let out = script(plane, "plugin-image.sh").args(plugins).output()?;
    ensure!(
        out.status.success(),
        "plugin-image.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout)?;
    Ok(stdout
        .lines()
        .last()
        .context("no image reference")?
        .to_string())
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
