//! The local registry serves ordinary images too: the node's containerd trusts it (the
//! cluster's CA, `certs.d`), so an image pushed to it runs in a Pod that has the pull
//! Secret, and a Pod without one is refused by the registry's basic auth.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_control_plane::{ControlPlane, TestNamespace, poll_until, script};

use crate::support;
use crate::support::wasm_plugins::pull_secret;

/// Runs `ctr` against the node's containerd, in the namespace the kubelet uses.
fn ctr(plane: &ControlPlane, args: &[&str]) -> Result<()> {
    let socket = plane.state_dir().join("node/containerd.sock");
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&socket)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "ctr {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Writes an archive of the web image tagged `tag` to `out`, with an environment
/// variable of its own so its ID is new; returns the archive's path.
fn web_image(tag: &str, out: &Path) -> Result<String> {
    let tool = Command::new(script("images.sh"))
        .args(["path", "oci-image"])
        .output()?;
    ensure!(
        tool.status.success(),
        "images.sh: {}",
        String::from_utf8_lossy(&tool.stderr)
    );
    let tool = PathBuf::from(String::from_utf8(tool.stdout)?.trim());
    let web = tool.with_file_name("web");
    let out = out.to_str().context("path")?;
    let built = Command::new(&tool)
        .args([
            "-out",
            out,
            "-tag",
            tag,
            "-entrypoint",
            "/web",
            "-user",
            "65532:65532",
        ])
        .arg("-add")
        .arg(format!("{}=/web:0755", web.display()))
        .args(["-env", &format!("WCM_TEST_IMAGE={}", fastrand::u64(..))])
        .output()?;
    ensure!(
        built.status.success(),
        "oci-image: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(out.to_string())
}

/// A Pod running `image` on the node, with the pull Secret `pull` or without.
fn web_pod(name: &str, image: &str, with_secret: bool) -> Result<Pod> {
    let secrets = match with_secret {
        true => json!([{"name": "pull"}]),
        false => json!([]),
    };
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "automountServiceAccountToken": false,
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            "imagePullSecrets": secrets,
            "containers": [{"name": "web", "image": image, "imagePullPolicy": "Always"}],
        },
    }))?)
}

#[support::test]
async fn an_image_pushed_to_the_local_registry_runs_on_the_node() -> Result<()> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    let registry = plane.registry()?;
    // An image of the node's web server with an ID of its own, imported into the
    // node and pushed from there. (Its own ID: the kubelet remembers which images it
    // pulled with credentials and asks them of every later Pod of that ID, so pushing
    // the node's preloaded web image would take it from Pods that have none.)
    let image = format!("{}/tests/web-{}:1", registry.address, fastrand::u32(..));
    let dir = tempfile::tempdir()?;
    let archive = web_image(&image, &dir.path().join("web.tar"))?;
    let hosts = plane.state_dir().join("node/certs.d");
    let hosts = hosts.to_str().context("path")?;
    let user = format!("{}:{}", registry.user, registry.password);
    ctr(plane, &["images", "import", &archive])?;
    ctr(
        plane,
        &[
            "images",
            "push",
            "--hosts-dir",
            hosts,
            "--user",
            &user,
            &image,
        ],
    )?;
    ctr(plane, &["images", "rm", &image])?;

    let ns = TestNamespace::create("node-registry").await?;
    pull_secret(&ns, &registry).await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    for (name, with_secret) in [("pulled", true), ("anonymous", false)] {
        (pods.create(&PostParams::default(), &web_pod(name, &image, with_secret)?)).await?;
    }
    let running = poll_until(Duration::from_secs(120), || async {
        let status = pods.get("pulled").await.ok()?.status?;
        let container = status.container_statuses?.into_iter().next()?;
        (status.phase.as_deref() == Some("Running")).then_some(container.image_id)
    })
    .await;
    let Some(image_id) = running else {
        anyhow::bail!("the Pod did not run:\n{}", ns.describe_pods().await);
    };
    // The image ID names a repository of the registry (containerd reports one of the
    // names it has pulled these bytes under: every run pushes the same image).
    ensure!(
        image_id.starts_with(&format!("{}/tests/web-", registry.address)),
        "{image_id}"
    );

    // No credentials: the registry says no, and the kubelet says why.
    let refused = poll_until(Duration::from_secs(120), || async {
        let status = pods.get("anonymous").await.ok()?.status?;
        let waiting = status
            .container_statuses?
            .into_iter()
            .next()?
            .state?
            .waiting?;
        let reason = waiting.reason.unwrap_or_default();
        ["ErrImagePull", "ImagePullBackOff"]
            .contains(&reason.as_str())
            .then_some(waiting.message.unwrap_or_default())
    })
    .await;
    let message = refused.context("the Pod without credentials was not refused")?;
    ensure!(
        message.contains("401 Unauthorized") || message.contains("unauthorized"),
        "{message}"
    );
    Ok(())
}
