//! `--leader-elect-mode=per-plugin` on the real control plane: three host processes
//! share nine plugins (the five examples under names of their own, in Rust, Go,
//! JavaScript and Python, and four copies of label-mirror, each writing a label of
//! its own; `support::plugin_workload`), a Lease per plugin. Every
//! plugin is held by exactly one replica and each replica holds three ± one; a
//! replica killed with SIGKILL loses its plugins to the others within the lease
//! duration and a retry period, and every ConfigMap, Pod and WebApp changed
//! meanwhile converges; a replica added takes its share, each plugin released by its
//! holder (drained), not left to expire, and a scale-up from one replica to three
//! hands six plugins over the same way. A rolling restart under churn moves each
//! plugin once or twice, and in the API server's audit log every write a plugin made
//! comes from the replica that acquired the plugin last, the times replicas held it
//! never overlapping. (Replicas killed at random: `plugin_chaos`.)

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use crate::support::election::{
    CONVERGE, HANDOVER, per_plugin_replica, per_plugin_replica_with, plugin_holders,
};
use crate::support::lease_audit::{Holds, holdings, no_overlap};
use crate::support::per_plugin::{converged, scene, spread_over, spread_within, taken_over};
use crate::support::plugin_workload::SMALL;
use crate::support::{self, HostProcess, eventually};

/// Waits until `holder` alone says it acts for the plugin of `lease` (its
/// `leader_election_master_status` is 1, every other's 0). None acting is a moment
/// of an acquire whose answer came late (the Lease names the holder, which has not
/// opened the gate yet); two acting at once fails at once.
async fn acting_alone(lease: &str, holder: &str, hosts: &[(&str, &HostProcess)]) -> Result<()> {
    let deadline = std::time::Instant::now() + CONVERGE;
    loop {
        let mut acting = Vec::new();
        for (identity, host) in hosts {
            let labels = [("name", lease)];
            if host
                .metric("leader_election_master_status", &labels)
                .await?
                == 1.0
            {
                acting.push(*identity);
            }
        }
        ensure!(acting.len() <= 1, "{lease}: {acting:?} act at once");
        if acting == [holder] {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "{lease}: held by {holder}, acting: {acting:?}; the replicas said {:#?}",
            hosts
                .iter()
                .map(|(_, h)| h.lines_with(&["plugin lease"]))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[support::test]
async fn nine_plugins_spread_over_three_replicas_and_a_killed_one_loses_its_share() -> Result<()> {
    let (ns, client, name, dir) = scene("plugin-leases").await?;
    let mut a = per_plugin_replica(&ns, dir.path(), "replica-a")?;
    let b = per_plugin_replica(&ns, dir.path(), "replica-b")?;
    let c = per_plugin_replica(&ns, dir.path(), "replica-c")?;
    // Settled (three each, within the 3 ± 1 asked), so no plugin is mid-hand-over
    // while the gauges are read.
    let by = spread_within(&client, &name, &["replica-a", "replica-b", "replica-c"], 0).await?;
    eprintln!("nine plugins over three replicas: {by:?}");
    // Exactly one replica acts for each plugin: its gauge, and no other's, says so.
    let hosts = [("replica-a", &a), ("replica-b", &b), ("replica-c", &c)];
    for (plugin, holder) in &by {
        acting_alone(&format!("{name}-{plugin}"), holder, &hosts).await?;
    }
    SMALL.round(&client, &name, "one").await?;
    converged(&ns, "one").await?;

    // SIGKILL replica-a: its plugins go to b and c within the lease and two retries.
    let lost: Vec<String> = (by.iter())
        .filter(|(_, h)| *h == "replica-a")
        .map(|(p, _)| p.clone())
        .collect();
    let killed = Timestamp::now();
    a.kill()?;
    SMALL.round(&client, &name, "two").await?;
    let by = spread_over(&client, &name, &["replica-b", "replica-c"]).await?;
    let took = taken_over(&client, &name, &lost, "replica-a", killed).await?;
    eprintln!("the killed replica's plugins taken over after {took:?}");
    converged(&ns, "two").await?;
    eprintln!("after the kill: {by:?}");

    // A replica added takes its share, each plugin handed over by release.
    let d = per_plugin_replica(&ns, dir.path(), "replica-d")?;
    let after = spread_over(&client, &name, &["replica-b", "replica-c", "replica-d"]).await?;
    eprintln!("after a replica was added: {after:?}");
    for (plugin, holder) in after.iter().filter(|(_, h)| *h == "replica-d") {
        let giver = if by[plugin] == "replica-b" { &b } else { &c };
        let needles = ["plugin lease released", &format!("plugin={plugin}")];
        let released = giver.wait_for_log(&needles, CONVERGE).await;
        released.with_context(|| format!("{plugin} reached {holder} without a release"))?;
    }
    SMALL.round(&client, &name, "three").await?;
    converged(&ns, "three").await?;
    drop((b, c, d));
    Ok(())
}

#[support::test]
async fn a_scale_up_from_one_to_three_replicas_hands_plugins_over_by_release() -> Result<()> {
    let (ns, client, name, dir) = scene("plugin-scale-up").await?;
    let first = per_plugin_replica_with(HANDOVER, &ns, dir.path(), "scale-1")?;
    spread_within(&client, &name, &["scale-1"], 0).await?;
    let second = per_plugin_replica_with(HANDOVER, &ns, dir.path(), "scale-2")?;
    let third = per_plugin_replica_with(HANDOVER, &ns, dir.path(), "scale-3")?;
    let after = spread_within(&client, &name, &["scale-1", "scale-2", "scale-3"], 0).await?;
    eprintln!("nine plugins after a scale-up from one replica to three: {after:?}");
    // Each plugin that moved was released by the first replica, then acquired by its
    // taker after the release and well within a lease duration of it: a release, not
    // an expiry.
    let now = plugin_holders(&client, &name).await?;
    let moved: Vec<&String> = (after.iter())
        .filter(|(_, h)| *h != "scale-1")
        .map(|(p, _)| p)
        .collect();
    ensure!(
        moved.len() == 6,
        "{} plugins moved, not six: {after:?}",
        moved.len()
    );
    for plugin in moved {
        // What the replicas said of the plugin, and of their membership: a failure
        // shows these lines, not three whole logs.
        let said = || {
            let of = |host: &HostProcess| {
                let mut lines = host.lines_with(&[&format!("plugin={plugin}")]);
                lines.extend(host.lines_with(&["membership Lease"]));
                lines
            };
            [of(&first), of(&second), of(&third)]
        };
        // The release is logged before its request is sent: there once the taker
        // holds the Lease, but for the moment the log takes to reach the test.
        let needles = ["plugin lease released", &format!("plugin={plugin}")];
        let logged = || async { first.last_logged_at(&needles).ok() };
        let released = eventually(Duration::from_secs(5), logged).await;
        let released = released.with_context(|| {
            format!(
                "{plugin} left scale-1 without a release; the replicas said {:#?}",
                said()
            )
        })?;
        let spec = now[plugin].1.spec.clone().context("no spec")?;
        let acquired = spec.acquire_time.context("no acquire time")?.0;
        // Two replicas joining at once may pass a plugin on once more between them
        // (one had not seen the other join yet); that hop is a release too, so the
        // last acquisition follows the last release, whoever made it.
        let last = [&first, &second, &third]
            .iter()
            .filter_map(|host| host.last_logged_at(&needles).ok())
            .max()
            .unwrap_or(released);
        // A quick taker may have acquired a few milliseconds before that line was
        // flushed; never a lease duration after.
        let gap = acquired.duration_since(last);
        let early = SignedDuration::from_millis(-200);
        ensure!(
            gap > early && gap < SignedDuration::try_from(HANDOVER.lease)?,
            "{plugin} acquired {gap:?} after its last release; the replicas said {:#?}",
            said()
        );
    }
    SMALL.round(&client, &name, "scaled").await?;
    converged(&ns, "scaled").await?;
    drop((first, second, third));
    Ok(())
}

/// Waits until `host` answers `/readyz` (its plugins loaded): a rolling update stops
/// an old replica only then.
async fn ready(host: &HostProcess) -> Result<()> {
    let address = host.metrics_address().await?;
    let ready = eventually(CONVERGE, || async {
        let (code, _) = support::http_status(&address, "/readyz").await.ok()?;
        (code == 200).then_some(())
    })
    .await;
    ready.context("the new replica never became ready")
}

#[support::test]
async fn a_rolling_restart_under_churn_never_has_two_replicas_write_for_one_plugin() -> Result<()> {
    let (ns, client, name, dir) = scene("plugin-rollout").await?;
    let mut replicas: Vec<(String, HostProcess)> = Vec::new();
    for identity in ["rollout-a", "rollout-b", "rollout-c"] {
        replicas.push((
            identity.to_string(),
            per_plugin_replica_with(HANDOVER, &ns, dir.path(), identity)?,
        ));
    }
    // Moves are counted from a settled assignment, three each.
    spread_within(&client, &name, &["rollout-a", "rollout-b", "rollout-c"], 0).await?;
    let before = plugin_holders(&client, &name).await?;
    SMALL.round(&client, &name, "v0").await?;
    converged(&ns, "v0").await?;

    // Churn while the replicas roll.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churning = SMALL.churn(&client, &name, &stop);
    // A rolling update: a new replica first, then the old one stopped (SIGTERM).
    let mut held: BTreeMap<String, Holds> = BTreeMap::new();
    for (old, new) in [
        ("rollout-a", "rollout-a2"),
        ("rollout-b", "rollout-b2"),
        ("rollout-c", "rollout-c2"),
    ] {
        let fresh = per_plugin_replica_with(HANDOVER, &ns, dir.path(), new)?;
        ready(&fresh).await?;
        replicas.push((new.to_string(), fresh));
        let at = replicas
            .iter()
            .position(|(id, _)| id == old)
            .context("no replica")?;
        let (identity, mut host) = replicas.remove(at);
        host.stop()?;
        held.insert(identity, holdings(&host, Timestamp::now())?);
        let live: Vec<&str> = replicas.iter().map(|(id, _)| id.as_str()).collect();
        spread_over(&client, &name, &live).await?;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let rounds = churning.await??;
    SMALL.round(&client, &name, "last").await?;
    converged(&ns, "last").await?;

    let after = plugin_holders(&client, &name).await?;
    let moves: BTreeMap<&String, i32> = (after.iter())
        .map(|(plugin, (_, lease))| {
            let count = |l: &Lease| {
                l.spec
                    .as_ref()
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0)
            };
            (plugin, count(lease) - count(&before[plugin].1))
        })
        .collect();
    eprintln!("moves per plugin over a rolling restart of three replicas: {moves:?}");
    ensure!(
        moves.values().all(|m| (1..=2).contains(m)),
        "a plugin moved more than twice, or never: {moves:?}"
    );
    for (identity, host) in &replicas {
        held.insert(identity.clone(), holdings(host, Timestamp::now())?);
    }
    let checked = no_overlap(&name, &held)?;
    eprintln!("{rounds} rounds of churn; {checked} writes, each by the plugin's last acquirer");
    ensure!(
        checked > 0,
        "no write of a plugin was found in the audit log"
    );
    Ok(())
}

#[support::test]
async fn the_every_replica_component_runs_three_replicas_with_a_lease_per_plugin() -> Result<()> {
    // An overlay of `deploy/host` with the component, as an operator writes one.
    let repo = support::docs::repo("");
    let overlay = tempfile::tempdir_in(repo.join("target"))?;
    let up = |to: &str| format!("../../{to}");
    let kustomization = format!(
        "resources: [{}]\ncomponents: [{}]\n",
        up("deploy/host"),
        up("deploy/components/every-replica")
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), kustomization)?;
    let built = std::process::Command::new(wcm_control_plane::ControlPlane::kubectl())
        .args(["kustomize", overlay.path().to_str().context("path")?])
        .output()?;
    let text = String::from_utf8(built.stdout)?;
    ensure!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let docs: Vec<serde_json::Value> = (text.split("\n---\n"))
        .map(serde_saphyr::from_str)
        .collect::<Result<_, _>>()?;
    let of = |kind: &str| docs.iter().find(|d| d["kind"] == kind).cloned();
    let deployment = of("Deployment").context("no Deployment")?;
    let budget = of("PodDisruptionBudget").context("no PodDisruptionBudget")?;
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    ensure!(deployment["spec"]["replicas"] == 3, "{deployment:#}");
    ensure!(deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0);
    let modes = (args.as_array().into_iter().flatten())
        .filter(|a| {
            a.as_str()
                .is_some_and(|a| a.starts_with("--leader-elect-mode"))
        })
        .collect::<Vec<_>>();
    ensure!(
        modes == [&json!("--leader-elect-mode=per-plugin")],
        "{args:#}"
    );
    ensure!(budget["spec"]["minAvailable"] == 2, "{budget:#}");
    Ok(())
}
