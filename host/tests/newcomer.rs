//! The README's path with a cluster of one's own: on a fresh cluster (a control plane of
//! this test's own, with nothing created in it), `make run` with `KUBECONFIG` set
//! grants the example plugins their RBAC, says so, and every example plugin runs with
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
use wcm_host::status::State;

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

#[tokio::test]
async fn make_run_on_a_configured_fresh_cluster_grants_the_examples_and_they_work() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
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
/// one, without `--image`.
fn deploy_asks_for_an_image(kubeconfig: &Path) -> Result<()> {
    let out = Command::new("bash")
        .arg(repo("scripts/deploy.sh"))
        .env("KUBECONFIG", kubeconfig)
        .output()?;
    let said = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(2), "{:?}: {said}", out.status);
    ensure!(
        said.contains("is not the local control plane")
            && said.contains("make deploy IMAGE=REGISTRY/wasm-controller-manager:TAG"),
        "{said}"
    );
    Ok(())
}
