//! A plugin's identity is its file's name, never what its code registers as. A file
//! `evil.wasm` holding pod-counter's code (so it registers as `pod-counter` and
//! declares `patch` on Nodes), dropped in while pod-counter itself is absent and with
//! pod-counter's RBAC applied, acts only as `evil`'s ServiceAccount: the API server
//! refuses its Node patch as that account, the Node is never labelled, and the audit
//! log has no write of pod-counter's account. The real pod-counter, dropped in later,
//! runs beside it under its own name and account.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use support::audit::writes_by;
use support::objects::{create_node, create_pod, node_label};
use support::rbac::{account_flags, apply_rbac, delete_rbac, set_verbs};
use support::{HostProcess, eventually, plugin_bytes, plugin_file, plugins_dir};
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_daemon::status::State;

const COUNT: &str = "pod-counter.example.com/count";
const WAIT: Duration = Duration::from_secs(60);

#[support::test]
async fn a_plugin_acts_as_its_file_name_whatever_it_registers_as() -> Result<()> {
    let plane = ControlPlane::shared()?;
    let ns = TestNamespace::create("identity").await?;
    let prefix = format!("{}-", ns.name());
    let dir = plugins_dir(&[("evil.wasm", plugin_bytes("pod-counter"))])?;
    // pod-counter's rights as generated for it; evil's may read Pods and Nodes and
    // write Events and Pods, but not patch Nodes.
    let victim = apply_rbac(plane, ns.name(), &prefix, &[plugin_file("pod-counter")])?;
    let own = apply_rbac(plane, ns.name(), &prefix, &[dir.path().join("evil.wasm")])?;
    let result = scenario(plane, &ns, &prefix, dir.path()).await;
    delete_rbac(plane, &own);
    delete_rbac(plane, &victim);
    result
}

async fn scenario(
    plane: &ControlPlane,
    ns: &TestNamespace,
    prefix: &str,
    dir: &std::path::Path,
) -> Result<()> {
    let client = ns.client();
    set_verbs(
        &client,
        &format!("{prefix}evil"),
        "nodes",
        &["list", "watch"],
    )
    .await?;
    let node = format!("{}-control-plane", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    create_pod(&client, ns.name(), "first").await?;
    let flags = account_flags(ns.name(), prefix, &["--access-review-interval=1s"]);
    let host = HostProcess::start(dir, &flags)?;
    let account = |plugin: &str| format!("system:serviceaccount:{}:{prefix}{plugin}", ns.name());

    // It runs under its file's name, forbidden the rule its own account lacks.
    let row = host.row_in("evil.wasm", State::Forbidden, WAIT).await?;
    ensure!(row.plugin.as_deref() == Some("evil"), "{row:?}");
    ensure!(
        row.registered_as.as_deref() == Some("pod-counter"),
        "{row:?}"
    );
    let why = row.reason.clone().unwrap_or_default();
    ensure!(why.contains("patch resource \"nodes\""), "{why}");
    let rights = row.rights.context("rights are reviewed")?;
    ensure!(rights.user == account("evil"), "{rights:?}");

    // It tries to label the Node, as itself, and is refused.
    let refused = eventually(WAIT, || async {
        let writes = writes_by(&plane.audit_log(), "wasm-controller-manager").ok()?;
        writes.into_iter().find(|w| {
            w.resource == "nodes" && w.name.as_deref() == Some(node.as_str()) && w.verb == "patch"
        })
    })
    .await
    .context("evil never tried to patch the Node")?;
    ensure!(
        refused.impersonated.as_deref() == Some(account("evil").as_str()) && refused.code == 403,
        "the Node patch was made as {:?} ({}), not refused as evil",
        refused.impersonated,
        refused.code
    );
    ensure!(node_label(&client, &node, COUNT).await?.is_none());
    let victims = writes_by(&plane.audit_log(), "wasm-controller-manager")?;
    let as_victim: Vec<_> = (victims.iter())
        .filter(|w| w.impersonated.as_deref() == Some(account("pod-counter").as_str()))
        .collect();
    ensure!(as_victim.is_empty(), "writes as pod-counter: {as_victim:?}");

    // The real pod-counter runs beside it, under its own name and account.
    std::fs::write(dir.join("pod-counter.wasm"), plugin_bytes("pod-counter"))?;
    let row = host
        .row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    ensure!(row.registered_as.is_none(), "{row:?}");
    let labelled = eventually(WAIT, || async {
        node_label(&client, &node, COUNT).await.ok()?
    })
    .await;
    labelled.context("the real pod-counter did not label the Node")?;
    let evil = host.row("evil.wasm").await?.context("evil's row")?;
    ensure!(evil.plugin.as_deref() == Some("evil"), "{evil:?}");
    ensure!(evil.state == State::Forbidden, "{evil:?}");
    Ok(())
}
