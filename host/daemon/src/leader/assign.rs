//! Which replica should hold which plugin, in `--leader-elect-mode=per-plugin`:
//! sticky rendezvous hashing with bounded loads, computed by every replica from the
//! live members and the Leases' holders alone, so all replicas agree without a
//! coordinator.
//!
//! Plain rendezvous hashing moves only a departed member's plugins, but with few
//! plugins it is uneven (nine plugins over three replicas land 5/2/2 often enough).
//! So each member is bounded to ⌈P/R⌉ plugins. A plugin stays with its current
//! holder while that holder is live, runs it and is within the bound (a member over
//! it keeps the plugins it ranks highest); every other plugin, in an order fixed by
//! its hash, goes to the member that ranks it highest among those not yet full.
//! Stickiness is what keeps a rolling restart cheap: a new replica takes plugins
//! only from members over the bound, and a leaving one's plugins move once. The
//! Lease of each plugin, not this function, is what keeps a plugin from running
//! twice: replicas that briefly disagree (one has not seen a new member yet) only
//! delay a hand-over.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// The wanted holder of each plugin some member runs, among the members that run
/// it (`runs`: each live member and the plugins it has loaded), keeping plugins with
/// their current `holders` where the bound allows. The same input gives the same
/// answer on every replica, whichever version of Rust built the host (the hash is
/// SHA-256, not the standard library's). A plugin whose candidates are all full
/// goes to the least loaded of them: no plugin that runs somewhere is left without
/// a holder.
///
/// A plugin whose holder is gone (a crashed replica's) goes to a member that joined
/// less than a lease duration ago (`unsettled`) only if no other runs it: such a
/// member first saw the Lease when it started, so it must wait a whole lease
/// duration from then before the Lease is expired to it, while a member that watched
/// the last renewals arrive can take it the moment it runs out.
pub fn assign(
    runs: &BTreeMap<String, BTreeSet<String>>,
    holders: &BTreeMap<String, String>,
    unsettled: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut plugins: Vec<&String> = runs.values().flatten().collect();
    plugins.sort_by_key(|p| (score(p, ""), p.as_str()));
    plugins.dedup();
    if runs.is_empty() {
        return BTreeMap::new();
    }
    let cap = plugins.len().div_ceil(runs.len());
    let mut load: BTreeMap<&String, usize> = BTreeMap::new();
    let mut assigned = BTreeMap::new();
    // Sticky first: each holder keeps the plugins it ranks highest, up to the bound.
    let runs_it = |m: &String, p: &String| runs.get(m).is_some_and(|ps| ps.contains(p));
    let mut kept: Vec<(&String, &String)> = (plugins.iter())
        .filter_map(|p| holders.get(*p).filter(|h| runs_it(h, p)).map(|h| (*p, h)))
        .collect();
    kept.sort_by_key(|(p, h)| (*h, Reverse(score(p, h)), *p));
    for (plugin, holder) in kept {
        let held = load.entry(holder).or_default();
        if *held < cap {
            *held += 1;
            assigned.insert(plugin.clone(), holder.clone());
        }
    }
    for plugin in plugins {
        if assigned.contains_key(plugin) {
            continue;
        }
        let mut ranked: Vec<&String> = (runs.keys()).filter(|m| runs_it(m, plugin)).collect();
        let orphan = holders.get(plugin).is_some_and(|h| !runs.contains_key(h));
        if orphan && ranked.iter().any(|m| !unsettled.contains(*m)) {
            ranked.retain(|m| !unsettled.contains(*m));
        }
        ranked.sort_by_key(|m| Reverse((score(plugin, m), m.as_str())));
        let count = |m: &&String| load.get(*m).copied().unwrap_or(0);
        let Some(holder) = (ranked.iter().find(|m| count(m) < cap))
            .or_else(|| ranked.iter().min_by_key(|m| count(m)))
            .copied()
        else {
            continue;
        };
        *load.entry(holder).or_default() += 1;
        assigned.insert(plugin.clone(), holder.clone());
    }
    assigned
}

/// The rank of `member` for `plugin`: the first eight bytes of SHA-256 over both.
fn score(plugin: &str, member: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(plugin.as_bytes());
    hash.update([0]);
    hash.update(member.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    /// Every one of `members` running every one of `plugins`.
    fn all_run(plugins: &[String], members: &[String]) -> BTreeMap<String, BTreeSet<String>> {
        let set: BTreeSet<String> = plugins.iter().cloned().collect();
        members.iter().map(|m| (m.clone(), set.clone())).collect()
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn loads(assigned: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
        let mut loads = BTreeMap::new();
        for holder in assigned.values() {
            *loads.entry(holder.clone()).or_default() += 1;
        }
        loads
    }

    #[test]
    fn every_plugin_goes_to_one_member_and_no_member_holds_more_than_its_share() {
        for (p, r) in [(9, 3), (10, 3), (1, 3), (7, 2), (40, 5), (3, 1)] {
            let (plugins, members) = (names("plugin", p), names("replica", r));
            let assigned = assign(&all_run(&plugins, &members), &none(), &BTreeSet::new());
            assert_eq!(assigned.len(), p, "{p} plugins over {r}");
            for (member, load) in loads(&assigned) {
                assert!(members.contains(&member));
                assert!(
                    load <= p.div_ceil(r),
                    "{member} holds {load} of {p} over {r}"
                );
            }
        }
    }

    #[test]
    fn every_replica_computes_the_same_answer_from_the_same_sets() {
        let (plugins, members) = (names("plugin", 9), names("replica", 3));
        let mut reversed = plugins.clone();
        reversed.reverse();
        assert_eq!(
            assign(&all_run(&plugins, &members), &none(), &BTreeSet::new()),
            assign(&all_run(&reversed, &members), &none(), &BTreeSet::new())
        );
    }

    #[test]
    fn a_member_leaving_moves_its_plugins_and_few_others() {
        let plugins = names("plugin", 30);
        let members = names("replica", 3);
        let before = assign(&all_run(&plugins, &members), &none(), &BTreeSet::new());
        let after = assign(&all_run(&plugins, &members[..2]), &before, &BTreeSet::new());
        let gone = &members[2];
        let moved_others = (plugins.iter())
            .filter(|p| before[*p] != *gone && before[*p] != after[*p])
            .count();
        assert!(after.values().all(|m| m != gone));
        assert!(
            moved_others <= 10,
            "{moved_others} plugins of staying members moved"
        );
    }

    #[test]
    fn a_plugin_goes_only_to_a_member_that_runs_it_even_past_its_share() {
        let mut runs = all_run(&names("plugin", 4), &names("replica", 2));
        runs.get_mut("replica-1").expect("member").clear();
        let assigned = assign(&runs, &none(), &BTreeSet::new());
        assert_eq!(assigned.len(), 4);
        assert!(assigned.values().all(|m| m == "replica-0"), "{assigned:?}");
    }

    #[test]
    fn without_members_nothing_is_assigned() {
        assert!(assign(&BTreeMap::new(), &none(), &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_crashed_members_plugins_go_to_members_that_saw_it_renew_not_to_a_newcomer() {
        let plugins = names("plugin", 9);
        let members = names("replica", 3);
        let before = assign(&all_run(&plugins, &members), &none(), &BTreeSet::new());
        // replica-2 crashed; replica-3 has just started, and ranks some first.
        let after_members = ["replica-0", "replica-1", "replica-3"].map(String::from);
        let runs = all_run(&plugins, &after_members);
        let new: BTreeSet<String> = ["replica-3".to_string()].into();
        let newcomer_first = assign(&runs, &before, &BTreeSet::new());
        assert!(
            (newcomer_first.values()).any(|m| m == "replica-3"),
            "the case needs a plugin the newcomer would take: {newcomer_first:?}"
        );
        let after = assign(&runs, &before, &new);
        let orphans = plugins.iter().filter(|p| before[*p] == "replica-2");
        for plugin in orphans {
            assert_ne!(after[plugin], "replica-3", "{plugin} left to the newcomer");
        }
        // Alone, a newcomer takes them all the same: nobody else can.
        let alone = all_run(&plugins, &["replica-3".to_string()]);
        let after = assign(&alone, &before, &new);
        assert!(after.values().all(|m| m == "replica-3"), "{after:?}");
    }
}
