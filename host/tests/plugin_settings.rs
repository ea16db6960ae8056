//! A plugin's settings from the operator, against the real API server: the file
//! beside the plugin decides what it registers (here, the namespace it watches); a
//! changed file loads it again with the new settings, without a restart; a file that
//! does not parse is refused naming it, and the running version keeps working.

use crate::support;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::objects::{create_config_map, events_about};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::ControlPlane;
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(60);
const FILE: &str = "watch-options.wasm";
const SETTINGS: &str = "watch-options.settings.yaml";
const STEP: &str = "wcm.test/step";

/// `namespace` exists, without a ConfigMap `conf` from an earlier run.
async fn fresh(client: &Client, namespace: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(namespace).await?.is_none() {
        let ns = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    if cms.get_opt("conf").await?.is_some() {
        cms.delete("conf", &DeleteParams::default()).await?;
        let gone = eventually(WAIT, || async {
            cms.get_opt("conf").await.ok()?.is_none().then_some(())
        });
        gone.await.context("conf was not deleted")?;
    }
    Ok(())
}

/// Writes the settings the documented way: a new file renamed into place.
fn write_settings(dir: &Path, yaml: &str) -> Result<()> {
    let tmp = dir.join(".settings.tmp");
    std::fs::write(&tmp, yaml)?;
    Ok(std::fs::rename(tmp, dir.join(SETTINGS))?)
}

/// Whether the plugin recorded that it saw this `conf` (by uid: Events of an earlier
/// run's `conf` stay for an hour).
async fn was_seen(client: &Client, conf: &ConfigMap) -> Result<bool> {
    let namespace = conf.metadata.namespace.as_deref().unwrap_or_default();
    let events = events_about(client, namespace, "conf", "Seen1").await?;
    let uid = conf.metadata.uid.as_deref();
    Ok(events
        .iter()
        .any(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == uid))
}

/// Waits until the plugin recorded that it saw this `conf`.
async fn seen(client: &Client, conf: &ConfigMap) -> Result<()> {
    let found = eventually(WAIT, || async {
        was_seen(client, conf).await.ok()?.then_some(())
    })
    .await;
    found.with_context(|| format!("watch-options never saw {:?}", conf.metadata.namespace))
}

#[support::test]
async fn settings_decide_the_registration_reload_on_change_and_bad_ones_are_refused() -> Result<()>
{
    let client = ControlPlane::shared()?.admin_client().await?;
    let (b, c) = ("wcm-watch-b", "wcm-watch-c");
    for ns in [b, c] {
        fresh(&client, ns).await?;
    }
    let dir = plugins_dir(&[(FILE, plugin_bytes("watch-options"))])?;
    write_settings(dir.path(), &format!("namespaces: [{c}]\n"))?;
    let host = HostProcess::start(dir.path(), &[])?;
    let row = host.row_in(FILE, State::Running, WAIT).await?;
    let hash = row.hash.clone().unwrap_or_default();
    ensure!(
        hash.contains('+'),
        "the version's identity names its settings: {hash}"
    );
    let in_b = create_config_map(&client, b, "conf", &[(STEP, "1")]).await?;
    let in_c = create_config_map(&client, c, "conf", &[(STEP, "1")]).await?;
    seen(&client, &in_c).await?;
    ensure!(
        !was_seen(&client, &in_b).await?,
        "watched a namespace its settings do not name"
    );

    // New settings: registered again, now watching the other namespace.
    write_settings(dir.path(), &format!("namespaces: [{b}]\n"))?;
    seen(&client, &in_b).await?;
    let row = host.row_in(FILE, State::Running, WAIT).await?;
    ensure!(
        row.hash.as_deref() != Some(hash.as_str()),
        "same version: {row:?}"
    );

    // Settings that are not a mapping: refused, naming the file; the version runs on.
    write_settings(dir.path(), "- not\n- a mapping\n")?;
    let line = host
        .wait_for_log(&["plugin upgrade failed", SETTINGS], WAIT)
        .await?;
    ensure!(line.contains("must be a mapping"), "{line}");
    let row = host.row_in(FILE, State::Running, WAIT).await?;
    ensure!(
        row.reason.as_deref().is_some_and(|r| r.contains(SETTINGS)),
        "{row:?}"
    );
    Ok(())
}

#[support::test]
async fn only_bounded_regular_files_inside_the_plugins_directory_are_read() -> Result<()> {
    let outside = tempfile::tempdir()?;
    let secret = outside.path().join("kubeconfig");
    std::fs::write(&secret, "token: hunter2\n")?;
    let bytes = plugin_bytes("hostile-registration");
    let dir = plugins_dir(&[
        ("fifo.wasm", bytes.clone()),
        ("leak.wasm", bytes.clone()),
        ("big.wasm", bytes.clone()),
        ("harmless.wasm", bytes),
    ])?;
    // A FIFO as settings would hang a read; a link out of the directory would hand
    // the plugin any file the host may read; a plugin over the size bound is refused.
    let fifo = dir.path().join("fifo.settings.yaml");
    ensure!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()?
            .success(),
        "mkfifo"
    );
    std::os::unix::fs::symlink(&secret, dir.path().join("leak.settings.yaml"))?;
    let big = vec![0u8; 3 << 20];
    std::fs::write(dir.path().join("big.wasm"), big)?;
    let host = HostProcess::start(dir.path(), &["--max-plugin-file-mib", "2"])?;
    for (file, reason) in [
        ("fifo.wasm", "not a regular file (a FIFO)"),
        ("leak.wasm", "outside its directory"),
        (
            "big.wasm",
            "more than the limit of 2097152 (--max-plugin-file-mib)",
        ),
    ] {
        let row = host.row_in(file, State::Failed, WAIT).await?;
        let why = row.reason.unwrap_or_default();
        ensure!(why.contains(reason), "{file}: {why}");
    }
    ensure!(
        host.lines_with(&["hunter2"]).is_empty(),
        "the outside file reached the log"
    );
    host.row_in("harmless.wasm", State::Running, WAIT).await?;
    Ok(())
}
