//! Level-triggered correctness across interruptions: changes made while the host is
//! stopped, and changes made while its watches are broken by an apiserver restart,
//! all end in the right state, and the host itself never needs a restart.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::Client;
use support::objects::{config_map_label, create_config_map, set_config_map_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::{PrivateControlPlane, TestNamespace};

const CONVERGE: Duration = Duration::from_secs(90);
const SOURCE: &str = "wcm.test/source";
const MIRRORED: &str = "wcm.test/mirrored";

/// Waits until label-mirror has copied `value` onto the ConfigMap `name`.
async fn mirrored(client: &Client, ns: &str, name: &str, value: &str) -> Result<()> {
    let found = eventually(CONVERGE, || async {
        let label = config_map_label(client, ns, name, MIRRORED).await.ok()??;
        (label == value).then_some(())
    })
    .await;
    let last = config_map_label(client, ns, name, MIRRORED).await?;
    found.with_context(|| format!("{ns}/{name}: mirrored label is {last:?}, wanted {value:?}"))
}

#[support::test]
async fn labels_changed_while_the_host_is_stopped_end_right_after_restart() -> Result<()> {
    let ns = TestNamespace::create("stopped").await?;
    let (client, n) = (ns.client(), ns.name());
    let dir = plugins_dir(&[("label-mirror.wasm", plugin_bytes("label-mirror"))])?;
    for name in ["flipped", "changed", "returned"] {
        create_config_map(&client, n, name, &[(SOURCE, "A")]).await?;
    }
    let host = HostProcess::start(dir.path(), &[])?;
    for name in ["flipped", "changed", "returned"] {
        mirrored(&client, n, name, "A").await?;
    }
    set_config_map_label(&client, n, "returned", SOURCE, "B").await?;
    mirrored(&client, n, "returned", "B").await?;
    ensure!(host.terminate()?.success(), "the host did not stop cleanly");

    // While no host runs: A→B→A, A→B, and back to A after the host had mirrored B.
    set_config_map_label(&client, n, "flipped", SOURCE, "B").await?;
    set_config_map_label(&client, n, "flipped", SOURCE, "A").await?;
    set_config_map_label(&client, n, "changed", SOURCE, "B").await?;
    set_config_map_label(&client, n, "returned", SOURCE, "A").await?;

    let host = HostProcess::start(dir.path(), &[])?;
    mirrored(&client, n, "changed", "B").await?;
    mirrored(&client, n, "returned", "A").await?;
    mirrored(&client, n, "flipped", "A").await?;
    let key = format!("v1/ConfigMap {n}/flipped");
    host.wait_for_log(&["reconciled", "label-mirror", &key], CONVERGE)
        .await
        .context("the restarted host never reconciled the flipped ConfigMap")?;
    Ok(())
}

#[support::test]
async fn an_apiserver_restart_expires_the_watch_and_the_host_relists_without_losing_updates()
-> Result<()> {
    let state = tempfile::tempdir()?;
    let plane = PrivateControlPlane::start(&state.path().join("cluster"))?;
    let client = plane.admin_client().await?;
    let ns = "default";
    let dir = plugins_dir(&[("label-mirror.wasm", plugin_bytes("label-mirror"))])?;
    create_config_map(&client, ns, "before", &[(SOURCE, "A")]).await?;
    let mut host = HostProcess::start_on(&plane, dir.path(), &[])?;
    mirrored(&client, ns, "before", "A").await?;
    let lists = [("kind", "v1/ConfigMap")];
    ensure!(host.metric("wcm_informer_lists_total", &lists).await? == 1.0);

    // Writes the host's watch does not see move the cluster's resource version on, so
    // the restarted apiserver's watch cache starts past what the host last saw.
    for i in 0..5 {
        create_config_map(&client, ns, &format!("bystander-{i}"), &[]).await?;
    }
    plane.restart_apiserver()?;
    set_config_map_label(&client, ns, "before", SOURCE, "B").await?;
    create_config_map(&client, ns, "after", &[(SOURCE, "C")]).await?;

    mirrored(&client, ns, "before", "B").await?;
    mirrored(&client, ns, "after", "C").await?;
    ensure!(
        host.is_running(),
        "the host exited: {}",
        host.logs().join("\n")
    );
    let relisted = eventually(CONVERGE, || async {
        let n = host.metric("wcm_informer_lists_total", &lists).await.ok()?;
        (n >= 2.0).then_some(n)
    })
    .await;
    relisted
        .with_context(|| format!("no relist after the restart:\n{}", host.logs().join("\n")))?;
    host.wait_for_log(&["informer relisted", "kind=v1/ConfigMap"], CONVERGE)
        .await?;
    Ok(())
}
