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
//! never overlapping. Killed at random while ConfigMaps, Pods and WebApps churn,
//! replicas leave no plugin behind for longer than a take-over allows, and the audit
//! log says the same.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use serde_json::json;
use wcm_control_plane::TestNamespace;

use crate::support::election::{CONVERGE, SHORT, per_plugin_replica, plugin_holders};
use crate::support::lease_audit::{Holds, holdings, no_overlap, take_over};
use crate::support::plugin_workload::{PLUGINS, SMALL, compile_once, nine_plugins, plugin_files};
use crate::support::webapp::install_crd;
use crate::support::{self, HostProcess, eventually, plugin_file};

/// The nine plugins of `support::plugin_workload`, compiled once for every
/// replica of every scenario.
fn nine() -> Result<tempfile::TempDir> {
    static COMPILED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut compiled = COMPILED.lock().unwrap_or_else(|p| p.into_inner());
    if !*compiled {
        let host = std::path::Path::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
        compile_once(host, &plugin_files(plugin_file))?;
        *compiled = true;
    }
    nine_plugins(plugin_file)
}

/// Waits until the small workload converged to `value`.
async fn converged(ns: &TestNamespace, value: &str) -> Result<()> {
    let (client, name) = (ns.client(), ns.name());
    SMALL
        .converged(&client, name, value, CONVERGE)
        .await
        .map(drop)
}

/// A namespace of its own for a scenario, the WebApp CRD installed, and the nine
/// plugins' directory.
async fn scene(prefix: &str) -> Result<(TestNamespace, Client, String, tempfile::TempDir)> {
    let ns = TestNamespace::create(prefix).await?;
    let (client, name) = (ns.client(), ns.name().to_string());
    install_crd(&client).await?;
    Ok((ns, client, name, nine()?))
}

/// Waits until every plugin is held by one of `replicas`, each holding its share
/// ± 1 (3 ± 1 of nine over three); returns who holds what.
async fn spread_over(
    client: &Client,
    ns: &str,
    replicas: &[&str],
) -> Result<BTreeMap<String, String>> {
    spread_within(client, ns, replicas, 1).await
}

/// Waits until every plugin is held by one of `replicas`, each holding its share
/// ± `slack`; returns who holds what. With no slack the assignment has settled (a
/// spread of 4/3/2 is fair, but the bound then moves one plugin more).
async fn spread_within(
    client: &Client,
    ns: &str,
    replicas: &[&str],
    slack: usize,
) -> Result<BTreeMap<String, String>> {
    let spread = eventually(CONVERGE, || async {
        let held = plugin_holders(client, ns).await.ok()?;
        let by: BTreeMap<String, String> = (held.into_iter())
            .map(|(plugin, (holder, _))| (plugin, holder))
            .collect();
        let per = |r: &&str| by.values().filter(|h| h == r).count();
        let share = PLUGINS / replicas.len()..=PLUGINS.div_ceil(replicas.len());
        let fair = share.start().saturating_sub(slack)..=share.end() + slack;
        let even = replicas.iter().all(|r| fair.contains(&per(r)));
        let all = by.len() == PLUGINS && by.values().all(|h| replicas.contains(&h.as_str()));
        (all && even).then_some(by)
    })
    .await;
    match spread {
        Some(by) => Ok(by),
        None => anyhow::bail!(
            "never spread over {replicas:?}: {:?}",
            plugin_holders(client, ns).await
        ),
    }
}

/// Waits until each of `lost` (plugins `dead` held when it was killed at `killed`)
/// is held by another replica, and checks each was acquired within the lease
/// duration and a retry period of the dead replica's last renewal: the kill, or
/// later when a renewal it sent just before reached the API server after it. Both
/// the renewal and the take-over are read from the audit log (a plugin taken over
/// may have moved on since, to a replica started after the kill); returns the
/// slowest take-over.
async fn taken_over(
    client: &Client,
    ns: &str,
    lost: &[String],
    dead: &str,
    killed: Timestamp,
) -> Result<Duration> {
    // The survivors saw the dead replica's last renewals as they were written (a
    // watch), and look again the moment they run out: a lease duration after the
    // last one. The retry period is for the take-over's own request.
    let bound = SHORT.lease + SHORT.retry;
    let mut slowest = Duration::ZERO;
    for plugin in lost {
        let taken = eventually(CONVERGE, || async {
            let (holder, _) = plugin_holders(client, ns).await.ok()?.remove(plugin)?;
            (!holder.is_empty() && holder != dead).then_some(())
        })
        .await;
        taken.with_context(|| format!("{plugin} was not taken over"))?;
        let (from, taker, at) = take_over(&format!("{ns}-{plugin}"), dead, killed)?;
        let took = Duration::try_from(at.duration_since(from))?;
        ensure!(
            took <= bound,
            "{plugin} taken by {taker} {took:?} after the last renewal of {dead} (bound \
             {bound:?}; the kill at {killed}, that renewal applied at {from})"
        );
        slowest = slowest.max(took);
    }
    Ok(slowest)
}

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

#[tokio::test]
async fn nine_plugins_spread_over_three_replicas_and_a_killed_one_loses_its_share() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
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

#[tokio::test]
async fn a_scale_up_from_one_to_three_replicas_hands_plugins_over_by_release() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    let (ns, client, name, dir) = scene("plugin-scale-up").await?;
    let first = per_plugin_replica(&ns, dir.path(), "scale-1")?;
    spread_within(&client, &name, &["scale-1"], 0).await?;
    let second = per_plugin_replica(&ns, dir.path(), "scale-2")?;
    let third = per_plugin_replica(&ns, dir.path(), "scale-3")?;
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
        let needles = ["plugin lease released", &format!("plugin={plugin}")];
        let released = first.logged_at(&needles, CONVERGE).await;
        let released =
            released.with_context(|| format!("{plugin} left scale-1 without a release"))?;
        let spec = now[plugin].1.spec.clone().context("no spec")?;
        let acquired = spec.acquire_time.context("no acquire time")?.0;
        // The release is logged once its request returned, so a quick taker may have
        // acquired a few milliseconds before that line; never a lease duration after.
        let gap = acquired.duration_since(released);
        let early = SignedDuration::from_millis(-200);
        let said = |host: &HostProcess| host.lines_with(&[&format!("plugin={plugin}")]);
        ensure!(
            gap > early && gap < SignedDuration::try_from(SHORT.lease)?,
            "{plugin} acquired {gap:?} after scale-1 released it; the replicas said {:#?}",
            [said(&first), said(&second), said(&third)]
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

#[tokio::test]
async fn a_rolling_restart_under_churn_never_has_two_replicas_write_for_one_plugin() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    let (ns, client, name, dir) = scene("plugin-rollout").await?;
    let mut replicas: Vec<(String, HostProcess)> = Vec::new();
    for identity in ["rollout-a", "rollout-b", "rollout-c"] {
        replicas.push((
            identity.to_string(),
            per_plugin_replica(&ns, dir.path(), identity)?,
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
        let fresh = per_plugin_replica(&ns, dir.path(), new)?;
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

#[tokio::test]
async fn the_every_replica_component_runs_three_replicas_with_a_lease_per_plugin() -> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
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

#[tokio::test]
async fn replicas_killed_at_random_under_churn_leave_no_plugin_behind_and_none_run_twice()
-> Result<()> {
    let _turn = support::turns::one_file_at_a_time(module_path!());
    let seconds = std::env::var("WCM_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let lasting = Duration::from_secs(seconds.unwrap_or(180));
    let (ns, client, name, dir) = scene("plugin-chaos").await?;
    let mut next = 0;
    let mut fresh = || {
        next += 1;
        format!("chaos-{next}")
    };
    let mut replicas: Vec<(String, HostProcess)> = Vec::new();
    for _ in 0..3 {
        let identity = fresh();
        replicas.push((
            identity.clone(),
            per_plugin_replica(&ns, dir.path(), &identity)?,
        ));
    }
    let live: Vec<String> = replicas.iter().map(|(id, _)| id.clone()).collect();
    spread_over(
        &client,
        &name,
        &live.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churning = SMALL.churn(&client, &name, &stop);

    // Every 10–20 s a random replica is killed and a new one started in its place,
    // as a Deployment replaces a Pod.
    let mut held: BTreeMap<String, Holds> = BTreeMap::new();
    let (started, mut kills, mut slowest) = (std::time::Instant::now(), 0, Duration::ZERO);
    while started.elapsed() < lasting {
        tokio::time::sleep(Duration::from_millis(fastrand::u64(10_000..20_000))).await;
        let (dead, mut host) = replicas.remove(fastrand::usize(..replicas.len()));
        let lost: Vec<String> = (plugin_holders(&client, &name).await?.into_iter())
            .filter(|(_, (holder, _))| *holder == dead)
            .map(|(plugin, _)| plugin)
            .collect();
        let killed = Timestamp::now();
        host.kill()?;
        held.insert(dead.clone(), holdings(&host, killed)?);
        let identity = fresh();
        replicas.push((
            identity.clone(),
            per_plugin_replica(&ns, dir.path(), &identity)?,
        ));
        slowest = slowest.max(taken_over(&client, &name, &lost, &dead, killed).await?);
        kills += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let rounds = churning.await??;
    let live: Vec<&str> = replicas.iter().map(|(id, _)| id.as_str()).collect();
    spread_over(&client, &name, &live).await?;
    SMALL.round(&client, &name, "last").await?;
    converged(&ns, "last").await?;
    for (identity, host) in &replicas {
        held.insert(identity.clone(), holdings(host, Timestamp::now())?);
    }
    let checked = no_overlap(&name, &held)?;
    eprintln!(
        "{kills} kills in {lasting:?}, {rounds} rounds of churn: slowest take-over {slowest:?}; \
         {checked} writes, each by the plugin's last acquirer"
    );
    Ok(())
}
