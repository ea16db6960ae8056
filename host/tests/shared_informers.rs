//! Informers are shared between plugins (both hold Pods as metadata), a periodic resync reconciles unchanged
//! objects, and deletions reach the plugin as a key whose object is gone.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result};
use kube::Client;
use support::objects::{create_pod, delete_pod, events_about, pod_watch_requests};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(60);

#[support::test]
async fn two_plugins_watching_pods_share_one_watch_and_deletions_are_delivered() -> Result<()> {
    let ns = TestNamespace::create("shared").await?;
    let client = ns.client();
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("key-recorder.wasm", plugin_bytes("key-recorder")),
    ])?;
    // The API server's own admission informers may watch Pods too: count the change.
    let before = pod_watch_requests(&client).await?;
    let host = HostProcess::start(dir.path(), &[])?;
    host.wait_for_log(&["plugin loaded", "plugin=key-recorder"], WAIT)
        .await?;
    host.wait_for_log(&["plugin loaded", "plugin=pod-counter"], WAIT)
        .await?;
    let pod_watches = host.lines_with(&["informer started", "kind=v1/Pod "]);
    assert_eq!(
        pod_watches.len(),
        1,
        "one Pod informer for both plugins: {pod_watches:?}"
    );
    let opened = eventually(WAIT, || async {
        let now = pod_watch_requests(&client).await.ok()?;
        (now > before).then_some(now - before)
    })
    .await;
    assert_eq!(opened, Some(1), "watch requests the host opened on Pods");

    create_pod(&client, ns.name(), "short-lived").await?;
    let seen = times_recorded(&client, ns.name(), "Seen", 1).await;
    seen.context("key-recorder never reconciled the new Pod")?;

    // Nothing changes the Pod, yet the periodic resync reconciles it again.
    let resynced = times_recorded(&client, ns.name(), "Seen", 3).await;
    resynced.context("the unchanged Pod was not reconciled again by the resync")?;

    delete_pod(&client, ns.name(), "short-lived").await?;
    let gone = times_recorded(&client, ns.name(), "Gone", 1).await;
    gone.context("the deletion was not delivered as a key whose get is not-found")?;
    Ok(())
}

/// Waits until key-recorder's `reason` Event about the Pod `short-lived` has been
/// recorded at least `times` times (1 + its series count), and returns that number.
async fn times_recorded(client: &Client, ns: &str, reason: &str, times: i32) -> Option<i32> {
    eventually(WAIT, || async {
        let events = events_about(client, ns, "short-lived", reason).await.ok()?;
        let event = events.first()?;
        let recorded = event.series.as_ref().map_or(1, |s| s.count);
        (recorded >= times).then_some(recorded)
    })
    .await
}
