//! Leases written by someone else decide nothing they should not: a plugin's Lease is
//! the one named after it, so a Lease merely labelled for the plugin (a decoy with a
//! far holder and a duration of years) is ignored and reported while the plugin runs
//! on; and a Lease's duration is read as at most the group's, so one created ahead
//! with a holder no replica knows and a duration of 68 years holds the plugin (or the
//! replica's one Lease) for a lease duration, not forever.

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_control_plane::{TestNamespace, poll_until};

use crate::support::election::{LEASE, SHORT, flags, per_plugin_replica};
use crate::support::wasm_plugins::{WAIT, mirrored, source};
use crate::support::{self, HostProcess};

/// A Lease `name` held by someone no replica knows, for `i32::MAX` seconds, labelled
/// for `plugin` if given.
async fn decoy(ns: &TestNamespace, name: &str, plugin: Option<&str>) -> Result<()> {
    let labels = plugin.map(|p| json!({"wasm-controller-manager.io/plugin": p}));
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": "far-away", "leaseDurationSeconds": i32::MAX,
            "renewTime": Timestamp::now().to_string(), "leaseTransitions": 0}}))?;
    let api: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    api.create(&PostParams::default(), &lease).await?;
    Ok(())
}

/// A plugins directory with label-mirror.
fn label_mirror() -> Result<tempfile::TempDir> {
    support::plugins_dir(&[("label-mirror.wasm", support::plugin_bytes("label-mirror"))])
}

#[support::test]
async fn a_decoy_lease_holds_a_plugin_for_a_lease_duration_at_most_and_a_misnamed_one_not_at_all()
-> Result<()> {
    let ns = TestNamespace::create("decoy-leases").await?;
    let group = ns.name().to_string();
    // Created ahead, under the plugin's own name: expires as the group judges it.
    decoy(&ns, &format!("{group}-label-mirror"), Some("label-mirror")).await?;
    let dir = label_mirror()?;
    let replica = per_plugin_replica(&ns, dir.path(), "replica-a")?;
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;

    // Labelled for the plugin, named otherwise: ignored, said, and counted.
    decoy(
        &ns,
        &format!("{group}-label-mirror-decoy"),
        Some("label-mirror"),
    )
    .await?;
    replica
        .wait_for_log(
            &["a Lease labelled for a plugin but not named after it is ignored"],
            WAIT,
        )
        .await?;
    let ignored = replica
        .metric("wcm_leader_election_ignored_leases", &[])
        .await?;
    ensure!(ignored == 1.0, "ignored Leases counted {ignored}");
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;
    // The table shows the holder the replica's last election round read, brought in
    // at its next health tick (every second): not at once after a take-over.
    let holder = || async {
        let row = replica.row("label-mirror.wasm").await.ok()??;
        row.lease.map(|l| l.holder)
    };
    let shown = poll_until(WAIT, || async {
        holder().await.filter(|h| h == "replica-a")
    })
    .await;
    let last = holder().await;
    ensure!(shown.is_some(), "the plugin's holder is {last:?}");
    Ok(())
}

#[support::test]
async fn a_replicas_lease_created_ahead_with_a_duration_of_years_holds_it_a_lease_duration()
-> Result<()> {
    let ns = TestNamespace::create("decoy-lease").await?;
    decoy(&ns, ns.name(), None).await?;
    let dir = label_mirror()?;
    let election = flags(SHORT, ns.name());
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let host = HostProcess::start(dir.path(), &election)?;
    host.wait_for_log(&["became leader"], WAIT).await?;
    let waited = started.elapsed();
    eprintln!("a Lease written with a duration of 68 years held the replica {waited:?}");
    ensure!(
        waited < LEASE * 4 + Duration::from_secs(10),
        "waited {waited:?} for a Lease nobody renews"
    );
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    Ok(())
}
