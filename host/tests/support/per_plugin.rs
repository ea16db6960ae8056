//! The scenes of the per-plugin election tests (`plugin_leases`, `plugin_chaos`):
//! a namespace with the WebApp CRD and the nine plugins of `plugin_workload`, and
//! the checks they share — the plugins spread over the replicas, the workload
//! converged, a killed replica's plugins taken over in time.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use wcm_control_plane::TestNamespace;

use super::election::{CONVERGE, SHORT, plugin_holders};
use super::lease_audit::take_over;
use super::plugin_workload::{PLUGINS, SMALL, compile_once, nine_plugins, plugin_files};
use super::webapp::install_crd;
use super::{eventually, plugin_file};

/// The nine plugins of `support::plugin_workload`, compiled once for every
/// replica of every scenario.
pub fn nine() -> Result<tempfile::TempDir> {
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
pub async fn converged(ns: &TestNamespace, value: &str) -> Result<()> {
    let (client, name) = (ns.client(), ns.name());
    SMALL
        .converged(&client, name, value, CONVERGE)
        .await
        .map(drop)
}

/// A namespace of its own for a scenario, the WebApp CRD installed, and the nine
/// plugins' directory.
pub async fn scene(prefix: &str) -> Result<(TestNamespace, Client, String, tempfile::TempDir)> {
    let ns = TestNamespace::create(prefix).await?;
    let (client, name) = (ns.client(), ns.name().to_string());
    install_crd(&client).await?;
    Ok((ns, client, name, nine()?))
}

/// Waits until every plugin is held by one of `replicas`, each holding its share
/// ± 1 (3 ± 1 of nine over three); returns who holds what.
pub async fn spread_over(
    client: &Client,
    ns: &str,
    replicas: &[&str],
) -> Result<BTreeMap<String, String>> {
    spread_within(client, ns, replicas, 1).await
}

/// Waits until every plugin is held by one of `replicas`, each holding its share
/// ± `slack`; returns who holds what. With no slack the assignment has settled (a
/// spread of 4/3/2 is fair, but the bound then moves one plugin more).
pub async fn spread_within(
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
pub async fn taken_over(
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
