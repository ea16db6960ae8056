//! The host's image, built without a container engine (`scripts/image.sh`, as `make
//! image` does): it declares what the final stage of `Containerfile` declares, holds
//! only the binary, the libraries it links, CA certificates and the user (no shell),
//! and runs on the local node under the restricted Pod security profile.

use crate::support;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{LogParams, PostParams};
use serde_json::{Value, json};
use wcm_control_plane::{ControlPlane, TestNamespace, poll_until};

/// Builds the image from the test's host binary into `out`; returns its reference.
fn build_image(out: &Path) -> Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = Command::new("bash")
        .arg(root.join("scripts/image.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_wasm-controller-manager")])
        .arg("--out")
        .arg(out)
        .output()?;
    ensure!(
        built.status.success(),
        "image.sh failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let stdout = String::from_utf8_lossy(&built.stdout);
    stdout
        .lines()
        .last()
        .map(str::to_string)
        .context("no reference printed")
}

/// The image archive's config and the paths in its layers.
fn read_image(archive: &Path) -> Result<(Value, BTreeSet<String>)> {
    let mut entries = std::collections::HashMap::new();
    let mut tar = tar::Archive::new(std::fs::File::open(archive)?);
    for entry in tar.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.display().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        entries.insert(name, bytes);
    }
    let manifest: Value = serde_json::from_slice(&entries["manifest.json"])?;
    let config_name = manifest[0]["Config"].as_str().context("no Config")?;
    let config: Value = serde_json::from_slice(&entries[config_name])?;
    let mut paths = BTreeSet::new();
    for layer in manifest[0]["Layers"].as_array().context("no Layers")? {
        let bytes = &entries[layer.as_str().context("layer name")?];
        let mut files = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        for file in files.entries()? {
            paths.insert(
                format!("/{}", file?.path()?.display())
                    .trim_end_matches('/')
                    .to_string(),
            );
        }
    }
    Ok((config, paths))
}

/// What the final stage of `Containerfile` declares, by instruction.
fn containerfile_declarations() -> Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Containerfile"))?;
    let last = text.rsplit("\nFROM ").next().context("no FROM")?;
    Ok(last
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(i, _)| ["ENV", "USER", "ENTRYPOINT", "CMD"].contains(i))
        .map(|(i, v)| (i.to_string(), v.to_string()))
        .collect())
}

#[support::test]
fn the_image_declares_what_the_containerfile_declares_and_holds_nothing_else() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let archive = dir.path().join("host.tar");
    build_image(&archive)?;
    let (config, paths) = read_image(&archive)?;
    let c = &config["config"];
    for (instruction, value) in containerfile_declarations()? {
        let found = match instruction.as_str() {
            "USER" => c["User"].as_str().map(str::to_string),
            "ENTRYPOINT" => Some(c["Entrypoint"].to_string()),
            "CMD" => Some(c["Cmd"].to_string()),
            "ENV" => c["Env"].as_array().and_then(|e| {
                e.iter()
                    .map(|v| v.as_str().unwrap_or(""))
                    .find(|v| *v == value)
                    .map(str::to_string)
            }),
            _ => None,
        };
        let wanted: String = match instruction.as_str() {
            "ENTRYPOINT" | "CMD" => serde_json::from_str::<Value>(&value)?.to_string(),
            _ => value.clone(),
        };
        ensure!(
            found.as_deref() == Some(wanted.as_str()),
            "{instruction} {value}: image has {found:?}"
        );
    }
    ensure!(
        c["User"].as_str().is_some_and(|u| !u.starts_with('0')),
        "runs as root"
    );
    ensure!(
        paths.contains("/usr/local/bin/wasm-controller-manager"),
        "{paths:?}"
    );
    ensure!(
        paths.contains("/etc/ssl/certs/ca-certificates.crt"),
        "{paths:?}"
    );
    ensure!(paths.contains("/plugins"), "{paths:?}");
    for shell in ["/bin/sh", "/bin/bash", "/usr/bin/sh", "/bin/busybox"] {
        ensure!(!paths.contains(shell), "the image has a shell: {shell}");
    }
    let unexpected: Vec<_> = paths
        .iter()
        .filter(|p| {
            let file = p.as_str();
            !(file == "/usr/local/bin/wasm-controller-manager"
                || file.starts_with("/lib")
                || file.starts_with("/etc/")
                || ["/usr", "/usr/local", "/usr/local/bin", "/etc", "/plugins"].contains(&file))
        })
        .collect();
    ensure!(unexpected.is_empty(), "unexpected files: {unexpected:?}");
    Ok(())
}

#[support::test]
async fn the_image_runs_on_the_node_as_a_restricted_non_root_pod() -> Result<()> {
    let plane = ControlPlane::shared()?;
    plane
        .node()
        .context("the control plane runs without a node")?;
    let dir = tempfile::tempdir()?;
    let reference = build_image(&dir.path().join("host.tar"))?;
    let ns = TestNamespace::create("image").await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "host-version"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "host", "image": reference, "imagePullPolicy": "Never",
                "args": ["--version"],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let finished = poll_until(Duration::from_secs(180), || async {
        let phase = pods.get("host-version").await.ok()?.status?.phase?;
        ["Succeeded", "Failed"]
            .contains(&phase.as_str())
            .then_some(phase)
    })
    .await;
    let Some(phase) = finished else {
        bail!(
            "the Pod did not finish within 180 s:\n{}",
            ns.describe_pods().await
        );
    };
    let logs = pods.logs("host-version", &LogParams::default()).await?;
    if phase != "Succeeded" {
        bail!("the host's Pod {phase}: {logs}");
    }
    ensure!(logs.starts_with("wasm-controller-manager "), "{logs:?}");
    Ok(())
}
