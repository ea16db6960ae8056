//! The "write a plugin in …" guides, followed literally: every ```` ```sh guide ````
//! block of each guide runs in order, as one shell script, the way a reader would type
//! it — `wasm-controller-manager new`, the project's own `make build` and `make test`
//! (its unit test, then `wasm-controller-manager test` on its fixtures), RBAC from
//! `rbac`, the drop into a running host's plugins directory, and `kubectl wait` until
//! the plugin has acted in the real cluster — and the README's own "Writing a
//! controller" block. They run on a fresh control plane of the test's own, with
//! nothing created beforehand that they do not create. A guide that goes stale fails
//! here. Prints, per guide, the time from `new` to its last step.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use support::HostProcess;
use support::docs::{blocks, guide_steps, path_with_host, repo};
use wcm_control_plane::{ControlPlane, PrivateControlPlane};

const GUIDES: [&str; 5] = [
    "README.md",
    "docs/writing-a-plugin.md",
    "docs/writing-a-plugin-in-go.md",
    "docs/writing-a-plugin-in-python.md",
    "docs/writing-a-plugin-in-javascript.md",
];

/// A directory holding the pinned tool `scripts/setup.sh` installed.
fn tool_dir(variable: &str) -> Result<String> {
    let script = format!("source scripts/tools.env && echo \"${variable}\"");
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo(""))
        .output()?;
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// What a reader's shell has: the host binary, kubectl, componentize-py and
/// componentize-js on PATH, a kubeconfig of the cluster (its namespace `default`), the
/// running host's plugins directory, and the cluster's registry (`registry.env`).
fn reader_env(plane: &ControlPlane, plugins: &Path) -> Result<Vec<(String, String)>> {
    let kubeconfig = plugins.with_extension("kubeconfig");
    std::fs::copy(plane.admin_kubeconfig(), &kubeconfig)?;
    let dirs = [
        ControlPlane::kubectl()
            .parent()
            .context("kubectl dir")?
            .to_path_buf(),
        PathBuf::from(tool_dir("PYTHON_TOOLS")?).join("bin"),
    ];
    let path: Vec<String> = (dirs.iter().map(|d| d.display().to_string()))
        .chain([path_with_host()])
        .collect();
    let js = tool_dir("JS_TOOLS")? + "/node_modules/.bin/componentize-js";
    let registry = plane.registry()?;
    Ok(vec![
        ("WCM_REGISTRY".into(), registry.address),
        (
            "WCM_REGISTRY_CA".into(),
            registry.ca_file.display().to_string(),
        ),
        ("WCM_REGISTRY_USER".into(), registry.user),
        ("WCM_REGISTRY_PASSWORD".into(), registry.password),
        ("PATH".into(), path.join(":")),
        ("KUBECONFIG".into(), kubeconfig.display().to_string()),
        ("PLUGINS_DIR".into(), plugins.display().to_string()),
        // The projects' Makefiles take these from the environment (`?=`): the tool
        // setup.sh installed instead of `npm install`, and one target directory for
        // every Rust project, so only the first run builds the SDK's dependencies.
        ("COMPONENTIZE_JS".into(), js),
        (
            "CARGO_TARGET_DIR".into(),
            repo("target/guides").display().to_string(),
        ),
    ])
}

#[support::test]
async fn every_guide_followed_literally_ends_with_its_plugin_acting_in_the_cluster() -> Result<()> {
    // A fresh cluster of the test's own: nothing in it the guides do not create.
    let state = tempfile::tempdir()?;
    let plane = PrivateControlPlane::start(&state.path().join("cluster"))?;
    let work = tempfile::tempdir()?;
    let plugins = work.path().join("plugins");
    std::fs::create_dir(&plugins)?;
    let env = reader_env(&plane, &plugins)?;
    // As a reader's host runs: its plugins act as `wcm-system/wcm-plugin-<name>`, so
    // each guide's own `rbac` step is what lets its plugin act.
    let identity = ["--plugin-service-account-namespace=wcm-system"];
    let host = HostProcess::start_on(&plane, &plugins, &identity)?;
    follow_guides(&env, work.path(), &host).await
}

async fn follow_guides(env: &[(String, String)], work: &Path, host: &HostProcess) -> Result<()> {
    for guide in GUIDES {
        let steps = guide_steps(guide);
        ensure!(!steps.is_empty(), "{guide}: no `sh guide` block");
        let script = format!("set -euo pipefail\n{}", steps.concat());
        let begun = Instant::now();
        let out = Command::new("bash")
            .args(["-c", &script])
            .envs(env.iter().cloned())
            .current_dir(work)
            .output()?;
        ensure!(
            out.status.success(),
            "{guide}, followed literally, failed:\n{}{}\nhost log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            host.logs().join("\n")
        );
        eprintln!(
            "{guide}: from `new` to its last step: {:?}",
            begun.elapsed()
        );
    }
    Ok(())
}

#[support::test]
fn guide_blocks_are_read_in_order_and_other_blocks_are_not() {
    let markdown = "text\n```sh guide\na\nb\n```\n```sh\nnot a step\n```\n```sh guide\nc\n```\n";
    assert_eq!(blocks(markdown, "sh guide"), ["a\nb\n", "c\n"]);
}
