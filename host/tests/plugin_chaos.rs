//! `--leader-elect-mode=per-plugin` under chaos, on the real control plane: for three
//! minutes (`WCM_CHAOS_SECONDS`) a random replica of three is killed every 10–20 s
//! and a new one started while ConfigMaps, Pods and WebApps churn; each killed
//! replica's plugins are taken over within the lease duration and a retry period,
//! every object converges, and in the audit log no two replicas wrote for one plugin
//! at once. A file of its own: it times take-overs, so it does not share the
//! machine with the other multi-replica scenarios (an API server saturated by them
//! answered a taker's Lease write with 504 and the take-over came late).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::jiff::Timestamp;

use crate::support::election::{per_plugin_replica, plugin_holders};
use crate::support::lease_audit::{Holds, holdings, no_overlap};
use crate::support::per_plugin::{converged, scene, spread_over, taken_over};
use crate::support::plugin_workload::SMALL;
use crate::support::{self, HostProcess};

#[support::test]
async fn replicas_killed_at_random_under_churn_leave_no_plugin_behind_and_none_run_twice()
-> Result<()> {
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
