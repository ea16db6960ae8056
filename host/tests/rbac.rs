//! `wasm-controller-manager rbac`: the RBAC of the example plugins is the reviewed file
//! `deploy/rbac.yaml` that `kubectl apply -k deploy/` applies, and the real API server
//! accepts it
//! (`kubectl apply --dry-run=server`); a file that is no plugin is refused by name.

mod support;

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::{Result, ensure};
use support::rbac::{rbac, rbac_file};
use support::{kubectl, plugin_file};
use wcm_control_plane::{ControlPlane, TestNamespace};

const EXPECTED: &str = include_str!("../../deploy/rbac.yaml");
const EXAMPLES: [&str; 5] = [
    "config-reloader",
    "data-hash",
    "deployment-reconcile",
    "phase-labeller",
    "pod-counter",
];

#[test]
fn the_examples_rbac_is_the_reviewed_file() -> Result<()> {
    let files: Vec<PathBuf> = EXAMPLES.iter().map(|p| plugin_file(p)).collect();
    let out = rbac(&files)?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout)?;
    ensure!(
        yaml == EXPECTED,
        "the examples' RBAC changed; review it and regenerate with\n  \
         target/debug/wasm-controller-manager rbac target/plugins > deploy/rbac.yaml\n\
         new output:\n{yaml}"
    );
    Ok(())
}

#[tokio::test]
async fn the_api_server_accepts_the_output_for_any_namespace() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("rbac").await?;
    let mut args = vec![PathBuf::from("--namespace"), PathBuf::from(ns.name())];
    args.extend(EXAMPLES.iter().map(|p| plugin_file(p)));
    let file = rbac_file(&args)?;
    let apply = ["apply", "--dry-run=server", "-f"].map(OsStr::new);
    let said = kubectl(plane, &[&apply[..], &[file.path().as_os_str()]].concat())?;
    let account = "serviceaccount/wcm-plugin-pod-counter created (server dry run)";
    ensure!(said.contains(account), "{said}");
    ensure!(
        said.contains(
            "clusterrolebinding.rbac.authorization.k8s.io/wcm-plugin-pod-counter created"
        ),
        "{said}"
    );
    Ok(())
}

#[test]
fn a_file_that_is_no_plugin_is_refused_by_name() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let bad = dir.path().join("broken.wasm");
    std::fs::write(&bad, b"not wasm")?;
    let out = rbac(&[plugin_file("pod-counter"), bad])?;
    let said = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && out.stdout.is_empty(), "{said}");
    ensure!(
        said.contains("broken.wasm: not a WebAssembly file"),
        "{said}"
    );
    Ok(())
}
