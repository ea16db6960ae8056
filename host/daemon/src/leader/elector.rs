//! One candidate's reads and writes of the Lease: acquire, renew, release.
//!
//! Every write is a `replace` carrying the resourceVersion that was read, so when two
//! candidates race for an expired Lease the API server accepts exactly one update and
//! answers the other with a conflict, which here means "someone else won".

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;

use super::config::ElectionConfig;
use super::record::{Decision, LeaseRecord, Observation, decide, observe, released};

/// The outcome of one attempt to acquire or renew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This candidate holds the Lease now.
    Leading,
    /// Another candidate holds an unexpired lease.
    Following {
        /// Its identity.
        holder: String,
    },
    /// Another candidate wrote the Lease between our read and our write.
    LostRace,
}

/// A candidate in the election for one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: ElectionConfig,
    observed: Option<Observation>,
    /// The Lease as this candidate last wrote it, or as a watch last delivered it:
    /// the next attempt writes on it without reading first (one request, as
    /// client-go's fast path for a holder does); a conflict sends it the long way.
    last: Option<Lease>,
    /// Labels and annotations every write of the Lease carries.
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl Elector {
    /// A candidate with `config`, using `client` for the Lease.
    pub fn new(client: Client, config: ElectionConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            observed: None,
            last: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// This candidate, writing `labels` on the Lease (so `kubectl get leases -l`
    /// finds it).
    pub fn labelled(mut self, labels: BTreeMap<String, String>) -> Elector {
        self.labels = labels;
        self
    }

    /// Sets an annotation the next writes of the Lease carry.
    pub fn annotate(&mut self, key: &str, value: &str) {
        self.annotations.insert(key.to_string(), value.to_string());
    }

    /// The Lease's name.
    pub fn lease_name(&self) -> &str {
        &self.config.lease_name
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// The Lease as this candidate last read or wrote it.
    pub fn observed(&self) -> Option<&LeaseRecord> {
        self.observed.as_ref().map(|o| &o.record)
    }

    /// Notes the Lease as a watch delivered it (`lease`, whose record this replica
    /// first saw as `seen`), so expiry is judged from when this replica first saw its
    /// record, not from this candidate's next read (of two sightings of the same
    /// record the earlier counts), and the next attempt needs no read. A copy of the
    /// record this candidate wrote itself is older than or as old as its own.
    pub fn saw(&mut self, seen: &Observation, lease: &Lease) {
        let first = match &self.observed {
            Some(mine) if mine.record == seen.record => mine.changed_at.min(seen.changed_at),
            _ => {
                self.last = Some(lease.clone());
                seen.changed_at
            }
        };
        self.observed = Some(Observation {
            record: seen.record.clone(),
            changed_at: first,
        });
    }

    /// Whether, as last seen, another candidate holds the Lease and it has not run
    /// out: an attempt now would only read it.
    pub fn held_by_another(&self, now: Instant) -> bool {
        let seen = self.observed.as_ref();
        seen.is_some_and(|o| o.held_by_other(&self.config.identity, now))
    }

    /// Takes or renews the Lease if the rules allow: on the copy last written or
    /// watched if there is one, else (or if that copy was stale) on a fresh read,
    /// creating the Lease if absent. API errors other than a lost race are returned.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        if let Some(lease) = self.last.take() {
            match self.attempt_on(lease, Instant::now()).await? {
                Attempt::LostRace => {} // a stale copy: read it and try again
                attempt => return Ok(attempt),
            }
        }
        let now = Instant::now();
        let Some(lease) = self.api.get_opt(&self.config.lease_name).await? else {
            return self.create(now).await;
        };
        self.attempt_on(lease, now).await
    }

    /// The election's part of `lease`, its duration at most this candidate's own.
    fn record_of(&self, lease: &Lease) -> LeaseRecord {
        to_record(lease, self.config.lease_duration)
    }

    /// Decides on `lease` as read at `now`, and writes if the rules allow.
    async fn attempt_on(&mut self, lease: Lease, now: Instant) -> Result<Attempt, kube::Error> {
        let observation = observe(self.observed.as_ref(), self.record_of(&lease), now);
        let decision = decide(
            &observation,
            &self.config.identity,
            self.config.lease_duration,
            now,
            &Timestamp::now().to_string(),
        );
        self.observed = Some(observation);
        match decision {
            Decision::Wait { holder } => Ok(Attempt::Following { holder }),
            Decision::Write(record) => self.write(lease, &record, now).await,
        }
    }

    /// Each time a watch of the Lease sees it free (released by its holder, never
    /// held, or deleted), so a standby can try at once instead of at its next retry
    /// period. An expired but unreleased Lease is not "free" here: a crashed
    /// holder's Lease is still taken only after it expires, by the retry loop.
    pub fn releases(&self) -> impl Stream<Item = ()> + Send + 'static {
        let name = format!("metadata.name={}", self.config.lease_name);
        let changes = watcher(self.api.clone(), watcher::Config::default().fields(&name));
        changes.default_backoff().filter_map(|event| async move {
            match event {
                Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease))
                    if lease_holder(&lease).is_empty() =>
                {
                    Some(())
                }
                Ok(watcher::Event::Delete(_)) => Some(()),
                _ => None,
            }
        })
    }

    /// Hands the Lease back if this candidate holds it, so a standby takes over at
    /// once (it watches for the release) or at its next attempt.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.config.lease_name).await? else {
            return Ok(());
        };
        let record = self.record_of(&lease);
        if record.holder != self.config.identity {
            return Ok(());
        }
        let free = released(&record, &Timestamp::now().to_string());
        self.write(lease, &free, Instant::now()).await.map(|_| ())
    }

    async fn create(&mut self, now: Instant) -> Result<Attempt, kube::Error> {
        let empty = Observation {
            record: LeaseRecord::default(),
            changed_at: now,
        };
        let stamp = Timestamp::now().to_string();
        let Decision::Write(record) = decide(
            &empty,
            &self.config.identity,
            self.config.lease_duration,
            now,
            &stamp,
        ) else {
            unreachable!("an empty lease is always free")
        };
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.lease_namespace.clone()),
                labels: Some(self.labels.clone()).filter(|l| !l.is_empty()),
                annotations: Some(self.annotations.clone()).filter(|a| !a.is_empty()),
                ..ObjectMeta::default()
            },
            spec: Some(to_spec(&record)),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.last = Some(created);
                self.observed = Some(Observation {
                    record,
                    changed_at: now,
                });
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::LostRace),
            Err(e) => Err(e),
        }
    }

    /// Replaces the Lease read as `lease` (its resourceVersion is the precondition).
    async fn write(
        &mut self,
        mut lease: Lease,
        record: &LeaseRecord,
        now: Instant,
    ) -> Result<Attempt, kube::Error> {
        lease.spec = Some(to_spec(record));
        let metadata = &mut lease.metadata;
        for (field, wanted) in [
            (&mut metadata.labels, &self.labels),
            (&mut metadata.annotations, &self.annotations),
        ] {
            if !wanted.is_empty() {
                field.get_or_insert_default().extend(wanted.clone());
            }
        }
        let name = self.config.lease_name.clone();
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.last = Some(written);
                self.observed = Some(Observation {
                    record: record.clone(),
                    changed_at: now,
                });
                Ok(if record.holder == self.config.identity {
                    Attempt::Leading
                } else {
                    Attempt::Following {
                        holder: record.holder.clone(),
                    }
                })
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::LostRace),
            Err(e) => Err(e),
        }
    }
}

/// The election's part of `lease`, its duration at most `max_duration`.
///
/// The duration a Lease says is another process's word: a Lease written with a
/// holder no replica knows and a duration of years would otherwise hold the election
/// (or a plugin) that long. Every replica of a group is configured with the same
/// duration and renews far more often than it, so a longer one is read as that one.
pub(super) fn to_record(lease: &Lease, max_duration: std::time::Duration) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    let max_seconds = i32::try_from(max_duration.as_secs())
        .unwrap_or(i32::MAX)
        .max(1);
    LeaseRecord {
        holder: spec.holder_identity.unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0).min(max_seconds),
        transitions: spec.lease_transitions.unwrap_or(0),
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        acquire_time: spec.acquire_time.map(|t| t.0.to_string()),
    }
}

/// Who holds `lease`, as its spec says (empty when released).
fn lease_holder(lease: &Lease) -> &str {
    let spec = lease.spec.as_ref();
    spec.and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default()
}

fn to_spec(record: &LeaseRecord) -> LeaseSpec {
    let time = |s: &Option<String>| s.as_deref().and_then(|s| s.parse().ok()).map(MicroTime);
    LeaseSpec {
        holder_identity: Some(record.holder.clone()).filter(|h| !h.is_empty()),
        lease_duration_seconds: Some(record.lease_duration_seconds),
        lease_transitions: Some(record.transitions),
        renew_time: time(&record.renew_time),
        acquire_time: time(&record.acquire_time),
        ..LeaseSpec::default()
    }
}
