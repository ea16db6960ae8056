//! The election rules on one observed Lease, free of I/O so they can be tested alone.
//!
//! client-go's algorithm: a candidate judges expiry with its *own* clock, from the
//! moment it last saw the Lease's record change, and never compares the holder's
//! timestamps with its local wall clock (clocks of two machines disagree). Whoever
//! writes wins only if its update carries the resourceVersion it read; a conflict
//! means someone else wrote first.

use std::time::Duration;

use tokio::time::Instant;

/// The part of a Lease the election reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; empty when released.
    pub holder: String,
    /// `spec.leaseDurationSeconds`.
    pub lease_duration_seconds: i32,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
    /// `spec.renewTime` as written (RFC 3339, micro-seconds); compared only for change.
    pub renew_time: Option<String>,
    /// `spec.acquireTime` as written.
    pub acquire_time: Option<String>,
}

/// What a candidate remembers of the Lease between attempts.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The record last read.
    pub record: LeaseRecord,
    /// When (local monotonic clock) the record was last seen to change.
    pub changed_at: Instant,
}

impl Observation {
    /// How long the record says the lease lasts from a renewal.
    pub fn duration(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.record.lease_duration_seconds).unwrap_or(0))
    }

    /// When the lease runs out on this replica's clock (a lease duration after the
    /// record was seen to change), if someone holds it.
    pub fn expires_at(&self) -> Option<Instant> {
        let held = !self.record.holder.is_empty();
        held.then(|| self.changed_at + self.duration())
    }

    /// Whether a candidate other than `me` holds the lease and it has not run out
    /// at `now`: then `me` must wait.
    pub fn held_by_other(&self, me: &str, now: Instant) -> bool {
        self.record.holder != me && self.expires_at().is_some_and(|at| at > now)
    }
}

/// What to do after reading the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Another candidate holds an unexpired lease: wait and try again.
    Wait {
        /// The current holder.
        holder: String,
    },
    /// Write this record (guarded by the resourceVersion that was read).
    Write(LeaseRecord),
}

/// Records that the Lease was read now; keeps `changed_at` if the record is the same.
pub fn observe(previous: Option<&Observation>, record: LeaseRecord, now: Instant) -> Observation {
    match previous {
        Some(p) if p.record == record => Observation {
            record,
            changed_at: p.changed_at,
        },
        _ => Observation {
            record,
            changed_at: now,
        },
    }
}

/// Decides, for candidate `me`, whether to take or renew the Lease it observed.
/// `now_rfc3339` is this candidate's wall clock, written into the record only.
pub fn decide(
    observed: &Observation,
    me: &str,
    lease_duration: Duration,
    now: Instant,
    now_rfc3339: &str,
) -> Decision {
    let record = &observed.record;
    if observed.held_by_other(me, now) {
        return Decision::Wait {
            holder: record.holder.clone(),
        };
    }
    let renewing = record.holder == me;
    Decision::Write(LeaseRecord {
        holder: me.to_string(),
        lease_duration_seconds: whole_seconds(lease_duration),
        transitions: if renewing {
            record.transitions
        } else {
            record.transitions + 1
        },
        renew_time: Some(now_rfc3339.to_string()),
        acquire_time: if renewing {
            record.acquire_time.clone()
        } else {
            Some(now_rfc3339.to_string())
        },
    })
}

/// The record that hands the Lease back on a graceful stop: no holder, expiring at
/// once, so a standby takes over at its next attempt instead of a lease duration later.
pub fn released(record: &LeaseRecord, now_rfc3339: &str) -> LeaseRecord {
    LeaseRecord {
        holder: String::new(),
        lease_duration_seconds: 1,
        transitions: record.transitions,
        renew_time: Some(now_rfc3339.to_string()),
        acquire_time: record.acquire_time.clone(),
    }
}

fn whole_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn held_by(holder: &str, renew: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.into(),
            lease_duration_seconds: 15,
            transitions: 3,
            renew_time: Some(renew.into()),
            acquire_time: Some("t0".into()),
        }
    }

    #[test]
    fn an_unchanged_record_keeps_its_first_sighting_time() {
        let t0 = Instant::now();
        let first = observe(None, held_by("a", "r1"), t0);
        let same = observe(
            Some(&first),
            held_by("a", "r1"),
            t0 + Duration::from_secs(9),
        );
        assert_eq!(same.changed_at, t0);
        let renewed = observe(
            Some(&same),
            held_by("a", "r2"),
            t0 + Duration::from_secs(10),
        );
        assert_eq!(renewed.changed_at, t0 + Duration::from_secs(10));
    }

    #[test]
    fn another_holder_is_waited_for_until_the_lease_runs_out_on_our_clock() {
        let t0 = Instant::now();
        let seen = observe(None, held_by("a", "r1"), t0);
        let wait = decide(&seen, "b", LEASE, t0 + Duration::from_secs(14), "now");
        assert_eq!(wait, Decision::Wait { holder: "a".into() });
        let Decision::Write(taken) = decide(&seen, "b", LEASE, t0 + LEASE, "now") else {
            panic!("an expired lease must be taken");
        };
        assert_eq!(taken.holder, "b");
        assert_eq!(taken.transitions, 4, "a change of holder is a transition");
        assert_eq!(taken.acquire_time.as_deref(), Some("now"));
    }

    #[test]
    fn the_holder_renews_without_a_transition_and_keeps_its_acquire_time() {
        let t0 = Instant::now();
        let seen = observe(None, held_by("a", "r1"), t0);
        let Decision::Write(renewed) = decide(&seen, "a", LEASE, t0, "later") else {
            panic!("the holder always renews");
        };
        assert_eq!(
            (renewed.transitions, renewed.acquire_time.as_deref()),
            (3, Some("t0"))
        );
        assert_eq!(renewed.renew_time.as_deref(), Some("later"));
    }

    #[test]
    fn a_released_lease_is_free_at_once() {
        let t0 = Instant::now();
        let seen = observe(None, released(&held_by("a", "r1"), "r2"), t0);
        assert!(
            matches!(decide(&seen, "b", LEASE, t0, "now"), Decision::Write(r) if r.holder == "b")
        );
    }
}
