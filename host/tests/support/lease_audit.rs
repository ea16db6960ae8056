//! Who held and who wrote for each plugin in `--leader-elect-mode=per-plugin`, from
//! the replicas' logs and the API server's audit log: when each replica held each
//! plugin's Lease, the writes each made, and who took a killed replica's plugin
//! when.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::Timestamp;

use super::{HostProcess, audit, field_of, log_time};

/// Each plugin's holds by one replica: (plugin, from, to).
pub type Holds = Vec<(String, Timestamp, Timestamp)>;

/// From the audit log, for the Lease `lease` of a replica `dead` killed at `killed`:
/// when it last ran from (its last renewal applied, or the kill if later), and the
/// replica that wrote it next with when the API server received that write.
pub fn take_over(
    lease: &str,
    dead: &str,
    killed: Timestamp,
) -> Result<(Timestamp, String, Timestamp)> {
    let log = wcm_control_plane::ControlPlane::shared()?.audit_log();
    let writes = audit::writes_mentioning(&log, lease)?;
    let of_lease: Vec<_> = (writes.iter())
        .filter(|w| w.resource == "leases" && w.name.as_deref() == Some(lease) && w.code == 200)
        .filter(|w| w.user_agent.starts_with("wasm-controller-manager/"))
        .collect();
    let by_dead = |w: &&&audit::Write| replica_of(&w.user_agent) == Some(dead);
    let last = of_lease.iter().filter(by_dead).map(|w| w.completed).max();
    let from = last.map_or(killed, |last| last.max(killed));
    let next = (of_lease.iter())
        .filter(|w| !by_dead(w) && w.received >= from)
        .min_by_key(|w| w.received)
        .with_context(|| format!("no write of {lease} after {dead}'s in the audit log"))?;
    let taker = replica_of(&next.user_agent).unwrap_or_default().to_string();
    Ok((from, taker, next.received))
}

/// When `host` held each plugin's Lease, from its log: (plugin, from, to), an
/// interval still open ending at `now`.
pub fn holdings(host: &HostProcess, now: Timestamp) -> Result<Holds> {
    let mut open: BTreeMap<String, Timestamp> = BTreeMap::new();
    let mut held = Vec::new();
    for line in host.logs() {
        let acquired = line.contains("plugin lease acquired");
        let ended = line.contains("plugin lease released") || line.contains("plugin lease lost");
        if !(acquired || ended) {
            continue;
        }
        let at = log_time(&line)?;
        let plugin = field_of(&line, "plugin").context("no plugin field")?;
        match (acquired, open.remove(&plugin)) {
            (true, _) => drop(open.insert(plugin, at)),
            (false, Some(from)) => held.push((plugin, from, at)),
            (false, None) => {}
        }
    }
    held.extend(open.into_iter().map(|(plugin, from)| (plugin, from, now)));
    Ok(held)
}

/// The replica a User-Agent names: `wasm-controller-manager/0.1.0 (<identity>)`.
fn replica_of(agent: &str) -> Option<&str> {
    agent.split_once('(')?.1.split_once(')').map(|(id, _)| id)
}

/// Checks every write of a plugin in `ns` against the holdings: the times replicas
/// held a plugin are disjoint, and every write was made by the replica that acquired
/// the plugin last before it.
pub fn no_overlap(ns: &str, held: &BTreeMap<String, Holds>) -> Result<usize> {
    for (plugin, _, _) in held.values().flatten() {
        let mut times: Vec<(&String, Timestamp, Timestamp)> = (held.iter())
            .flat_map(|(r, h)| {
                h.iter()
                    .filter(|h| h.0 == *plugin)
                    .map(move |h| (r, h.1, h.2))
            })
            .collect();
        times.sort_by_key(|t| t.1);
        for pair in times.windows(2) {
            ensure!(pair[0].2 <= pair[1].1, "{plugin} held at once: {pair:?}");
        }
    }
    let log = wcm_control_plane::ControlPlane::shared()?.audit_log();
    let writes = audit::writes_by(&log, "wasm-controller-manager/")?;
    let ours = writes.iter().filter(|w| {
        let plugins = ["configmaps", "pods", "deployments", "webapps"];
        w.namespace.as_deref() == Some(ns)
            && plugins.contains(&w.resource.as_str())
            && w.verb == "patch"
    });
    let mut checked = 0;
    for write in ours {
        let replica = replica_of(&write.user_agent).context("no replica in the User-Agent")?;
        if !held.contains_key(replica) {
            continue; // another test's replicas: label-mirror watches every namespace
        }
        let account = write.impersonated.as_deref().unwrap_or_default();
        let plugin = account.rsplit(":wcm-plugin-").next().unwrap_or_default();
        // The replica that acquired the plugin last before the API server received
        // the write must be the writer. (Not "inside its hold": a killed replica's
        // last request can still arrive after its death, but never after another
        // replica acquired the plugin.)
        let last = (held.iter())
            .flat_map(|(r, h)| h.iter().map(move |h| (r, h)))
            .filter(|(_, (p, from, _))| p == plugin && *from <= write.received)
            .max_by_key(|(_, (_, from, _))| *from);
        ensure!(
            last.is_some_and(|(r, _)| r == replica),
            "{replica} wrote for {plugin} at {}, after {last:?} acquired it",
            write.received
        );
        checked += 1;
    }
    Ok(checked)
}
