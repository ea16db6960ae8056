//! The group's Leases as one watch sees them, for `--leader-elect-mode=per-plugin`:
//! each Lease with the moment this replica saw its record change, on its own clock,
//! and a signal each time a Lease changes hands.
//!
//! A watch instead of a list per round does two things. Expiry is judged from when
//! a renewal *arrived* (milliseconds after it was written) rather than from the next
//! list (up to a jittered retry period later), so a replica can take a crashed
//! holder's plugin the moment its Lease runs out — within the lease duration of the
//! crash — and the election wakes for exactly that moment ([`LeaseWatch::next_expiry`]).
//! And a release, a new member or a member leaving wakes the election at once, so a
//! drained hand-over costs a request, not a retry period. It also replaces two lists
//! per replica per round with one watch each.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::elector::to_record;
use super::record::{Observation, observe};

/// One Lease as the watch last saw it.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The object (its resourceVersion guards a delete).
    pub lease: Lease,
    /// Its election record and when this replica saw that record change.
    pub observed: Observation,
}

impl Watched {
    /// Whether someone holds the Lease and it has not run out at `now`.
    pub fn held_at(&self, now: Instant) -> bool {
        self.observed.expires_at().is_some_and(|at| at > now)
    }
}

/// The Leases one watch has seen, by name.
#[derive(Debug)]
pub(super) struct Seen {
    /// The longest duration a Lease is taken to last (the group's own).
    max_duration: std::time::Duration,
    /// When the first list arrived.
    synced_at: Option<Instant>,
    leases: BTreeMap<String, Watched>,
    /// The next list, while one is arriving (after the watch restarted).
    relisting: BTreeMap<String, Watched>,
}

impl Seen {
    /// Nothing seen yet; a Lease's duration read as at most `max_duration`.
    pub(super) fn new(max_duration: std::time::Duration) -> Seen {
        Seen {
            max_duration,
            synced_at: None,
            leases: BTreeMap::new(),
            relisting: BTreeMap::new(),
        }
    }

    /// Takes in one watch event seen at `now`; whether a Lease changed hands (a new
    /// Lease, another holder, a release, a delete, a fresh list).
    pub(super) fn apply(&mut self, event: watcher::Event<Lease>, now: Instant) -> bool {
        match event {
            watcher::Event::Apply(lease) => {
                let Some(name) = lease.metadata.name.clone() else {
                    return false;
                };
                let previous = self.leases.get(&name).map(|w| &w.observed);
                let holder = previous.map(|o| o.record.holder.clone());
                let observed = observe(previous, to_record(&lease, self.max_duration), now);
                let changed = holder.as_ref() != Some(&observed.record.holder);
                self.leases.insert(name, Watched { lease, observed });
                changed
            }
            watcher::Event::Delete(lease) => {
                let name = lease.metadata.name.unwrap_or_default();
                self.leases.remove(&name).is_some()
            }
            watcher::Event::Init => {
                self.relisting.clear();
                false
            }
            watcher::Event::InitApply(lease) => {
                let Some(name) = lease.metadata.name.clone() else {
                    return false;
                };
                let previous = self.leases.get(&name).map(|w| &w.observed);
                let observed = observe(previous, to_record(&lease, self.max_duration), now);
                self.relisting.insert(name, Watched { lease, observed });
                false
            }
            watcher::Event::InitDone => {
                self.leases = std::mem::take(&mut self.relisting);
                self.synced_at.get_or_insert(now);
                true
            }
        }
    }

    /// The earliest moment after `now` at which a Lease held by someone other than
    /// `me` runs out.
    pub(super) fn next_expiry(&self, me: &str, now: Instant) -> Option<Instant> {
        let others = (self.leases.values()).filter(|w| w.observed.record.holder != me);
        others
            .filter_map(|w| w.observed.expires_at())
            .filter(|at| *at > now)
            .min()
    }
}

/// A watch of the Leases matching a label selector, kept on the election's thread.
pub struct LeaseWatch {
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl LeaseWatch {
    /// Watches the Leases of `api` labelled as `selector` says; `handed` is notified
    /// each time one changes hands. Spawned on the caller's runtime.
    pub fn start(
        api: Api<Lease>,
        selector: &str,
        max_duration: std::time::Duration,
        handed: Arc<Notify>,
    ) -> LeaseWatch {
        let seen = Arc::new(Mutex::new(Seen::new(max_duration)));
        let config = watcher::Config::default().labels(selector);
        let (into, selector) = (seen.clone(), selector.to_string());
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config).default_backoff());
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        let now = Instant::now();
                        if lock(&into).apply(event, now) {
                            handed.notify_one();
                        }
                    }
                    Err(e) => tracing::warn!(selector, error = %e,
                        "the watch of the election's Leases failed; restarting it"),
                }
            }
        });
        LeaseWatch { seen, task }
    }

    /// When the first list arrived: until then the group is unknown, and for a lease
    /// duration after it a Lease's expiry is judged from that list, not from a
    /// renewal seen to arrive.
    pub fn synced_at(&self) -> Option<Instant> {
        lock(&self.seen).synced_at
    }

    /// Every Lease seen, by name.
    pub fn leases(&self) -> BTreeMap<String, Watched> {
        lock(&self.seen).leases.clone()
    }

    /// The earliest moment after now at which a Lease held by someone other than
    /// `me` runs out: the election looks again then.
    pub fn next_expiry(&self, me: &str) -> Option<Instant> {
        lock(&self.seen).next_expiry(me, Instant::now())
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(seen: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::ObjectMeta;

    fn lease(name: &str, holder: &str, renewed_second: i64) -> Lease {
        let at = k8s_openapi::jiff::Timestamp::from_second(renewed_second).expect("a valid second");
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()).filter(|h: &String| !h.is_empty()),
                lease_duration_seconds: Some(4),
                renew_time: Some(MicroTime(at)),
                ..LeaseSpec::default()
            }),
        }
    }

    fn synced(leases: &[Lease], now: Instant) -> Seen {
        let mut seen = Seen::new(Duration::from_secs(15));
        seen.apply(watcher::Event::Init, now);
        for l in leases {
            seen.apply(watcher::Event::InitApply(l.clone()), now);
        }
        assert!(seen.apply(watcher::Event::InitDone, now));
        seen
    }

    #[test]
    fn a_renewal_moves_the_expiry_to_when_it_arrived_and_wakes_no_one() {
        let t0 = Instant::now();
        let mut seen = synced(&[lease("p", "a", 1)], t0);
        let later = t0 + Duration::from_secs(1);
        assert!(!seen.apply(watcher::Event::Apply(lease("p", "a", 2)), later));
        assert_eq!(
            seen.next_expiry("b", later),
            Some(later + Duration::from_secs(4))
        );
        // The same record seen again (a relist) keeps the time of its first sighting.
        seen.apply(watcher::Event::Init, later + Duration::from_secs(2));
        let again = lease("p", "a", 2);
        seen.apply(
            watcher::Event::InitApply(again),
            later + Duration::from_secs(2),
        );
        seen.apply(watcher::Event::InitDone, later + Duration::from_secs(2));
        assert_eq!(
            seen.leases["p"].observed.expires_at(),
            Some(later + Duration::from_secs(4))
        );
    }

    #[test]
    fn a_lease_that_says_it_lasts_years_is_read_as_lasting_the_groups_duration() {
        let t0 = Instant::now();
        let mut decoy = lease("p", "far-away", 1);
        decoy.spec.as_mut().expect("spec").lease_duration_seconds = Some(i32::MAX);
        let seen = synced(&[decoy], t0);
        assert_eq!(
            seen.next_expiry("me", t0),
            Some(t0 + Duration::from_secs(15)),
            "the group's 15 s, not 68 years"
        );
    }

    #[test]
    fn a_new_holder_a_release_and_a_delete_each_wake_the_election() {
        let t0 = Instant::now();
        let mut seen = synced(&[lease("p", "a", 1)], t0);
        assert!(seen.apply(watcher::Event::Apply(lease("p", "b", 2)), t0));
        assert!(seen.apply(watcher::Event::Apply(lease("p", "", 3)), t0));
        assert!(!seen.leases["p"].held_at(t0), "a released Lease is free");
        assert!(seen.apply(watcher::Event::Apply(lease("q", "c", 3)), t0));
        assert!(seen.apply(watcher::Event::Delete(lease("q", "c", 3)), t0));
        assert!(!seen.leases.contains_key("q"));
    }

    #[test]
    fn only_leases_others_hold_and_not_yet_run_out_set_the_next_look() {
        let t0 = Instant::now();
        let seen = synced(&[lease("mine", "me", 1), lease("free", "", 1)], t0);
        assert_eq!(seen.next_expiry("me", t0), None);
        let seen = synced(&[lease("p", "a", 1)], t0);
        let past = t0 + Duration::from_secs(5);
        assert_eq!(seen.next_expiry("me", past), None, "already run out");
        assert!(!seen.leases["p"].held_at(past));
        assert!(seen.leases["p"].held_at(t0 + Duration::from_secs(3)));
    }
}
