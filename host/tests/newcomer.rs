//! The README's path with a cluster of one's own: on a fresh cluster (a control plane of
//! this test's own, with nothing created in it), `make run` with `KUBECONFIG` set
//! names the cluster's context and what it will apply there, then grants the example
//! plugins their RBAC, says so, and every example plugin runs with
//! all its rules granted: pod-counter counts, as its own ServiceAccount; the WebApp
//! controller waits for its CRD. `make deploy` against that cluster, which is not the
//! local one and so cannot get the host's image imported, stops at once saying how to
//! name an image in a registry, instead of a rollout stuck pulling. (The test runs `scripts/run.sh`, the recipe of
//! `make run` after `make build`: the test binary is that build, and `cargo test`
//! holds the build directory's lock while tests run.)

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use support::docs::repo;
use support::objects::{create_node, create_pod, node_label};
use support::{HostProcess, eventually};
use wcm_control_plane::PrivateControlPlane;
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(120);
/// The example plugins `make run` loads, and the state each reaches on a cluster
/// without the WebApp CRD.
const EXAMPLES: [(&str, State); 5] = [
    ("pod-counter.wasm", State::Running),
    ("phase-labeller.wasm", State::Running),
    ("data-hash.wasm", State::Running),
    ("config-reloader.wasm", State::Running),
    ("deployment-reconcile.wasm", State::Waiting),
];

#[support::test]
async fn make_run_on_a_configured_fresh_cluster_grants_the_examples_and_they_work() -> Result<()> {
    let state = tempfile::tempdir()?;
    let plane = PrivateControlPlane::start(&state.path().join("cluster"))?;
    let mut command = Command::new("bash");
    command
        .arg(repo("scripts/run.sh"))
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .env("KUBECONFIG", plane.admin_kubeconfig());
    let host = HostProcess::launch(command)?;
    host.wait_for_log(
        &[
            "granting the example plugins their RBAC",
            "kubectl apply -f -",
        ],
        WAIT,
    )
    .await?;
    // Which cluster, and what goes there, is said before anything is applied.
    let logs = host.logs();
    let said = logs
        .iter()
        .position(|l| l.contains("using the configured cluster: context"));
    let granted = logs
        .iter()
        .position(|l| l.contains("granting the example plugins"));
    ensure!(
        said.is_some() && said < granted,
        "the cluster was not named before the RBAC was applied: {logs:#?}"
    );
    // WasmPlugins of the host's namespace are followed, their CRD installed.
    host.wait_for_log(
        &["following the WasmPlugins of this namespace", "wcm-system"],
        WAIT,
    )
    .await?;
    for (file, state) in EXAMPLES {
        let row = host.row_in(file, state, WAIT).await?;
        if state == State::Waiting {
            let reason = row.reason.unwrap_or_default();
            ensure!(reason.contains("WebApp"), "{file}: {reason}");
            continue;
        }
        let rights = row.rights.with_context(|| format!("{file}: no rights"))?;
        ensure!(rights.granted == rights.declared, "{file}: {rights:?}");
    }
    let client = plane.admin_client().await?;
    create_node(&client, "newcomer-control-plane", true, Default::default()).await?;
    create_pod(&client, "default", "first").await?;
    let count = "pod-counter.example.com/count";
    let counted = eventually(WAIT, || async {
        let value = node_label(&client, "newcomer-control-plane", count)
            .await
            .ok()??;
        (value == "1").then_some(())
    })
    .await;
    counted.with_context(|| format!("no count label; log:\n{}", host.logs().join("\n")))?;
    let forbidden = host.lines_with(&["forbidden"]);
    ensure!(forbidden.is_empty(), "{forbidden:?}");
    deploy_asks_for_an_image(plane.admin_kubeconfig())
}

/// `scripts/deploy.sh` (what `make deploy` runs) on a cluster that is not the local
/// one, without `--image`: named by `KUBECONFIG`, and as a laptop names it, by
/// `~/.kube/config` with `KUBECONFIG` unset.
fn deploy_asks_for_an_image(kubeconfig: &Path) -> Result<()> {
    let home = tempfile::tempdir()?;
    std::fs::create_dir_all(home.path().join(".kube"))?;
    std::fs::copy(kubeconfig, home.path().join(".kube/config"))?;
    let by_variable = Command::new("bash")
        .arg(repo("scripts/deploy.sh"))
        .env("KUBECONFIG", kubeconfig)
        .output()?;
    // Another home, the caches and toolchain where they are (they default to the home).
    let real = std::env::var("HOME").unwrap_or_default();
    let kept = |var: &str, default: &str| std::env::var(var).unwrap_or(format!("{real}/{default}"));
    let by_home = Command::new("bash")
        .arg(repo("scripts/deploy.sh"))
        .env_remove("KUBECONFIG")
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", kept("XDG_CACHE_HOME", ".cache"))
        .env("RUSTUP_HOME", kept("RUSTUP_HOME", ".rustup"))
        .env("CARGO_HOME", kept("CARGO_HOME", ".cargo"))
        .output()?;
    for out in [by_variable, by_home] {
        let said = String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.code() == Some(2), "{:?}: {said}", out.status);
        ensure!(
            said.contains("is not the local control plane")
                && said.contains("make deploy IMAGE=REGISTRY/wasm-controller-manager:TAG"),
            "{said}"
        );
    }
    Ok(())
}
