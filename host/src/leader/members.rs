//! The group of replicas in `--leader-elect-mode=per-plugin`: each renews a Lease of
//! its own (`<name>-member-<hash of its identity>`, `holderIdentity` = its identity,
//! labelled `wasm-controller-manager.io/member=<name>`), and reads the others' to
//! know who is live. Liveness is judged as the election judges a Lease: by when this
//! replica last saw a record change, on its own clock, never by comparing another
//! machine's timestamps with its own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use tokio::time::Instant;

use super::config::ElectionConfig;
use super::elector::{Attempt, Elector, to_record};
use super::record::{Observation, observe};

/// The label naming the group a membership Lease belongs to.
pub const MEMBER_LABEL: &str = "wasm-controller-manager.io/member";

/// The annotation listing the plugins a member runs (comma-separated): a plugin is
/// assigned only among the members that run it, so one that failed to load on a
/// replica, or that a replica of another version lacks, is never left to it.
pub const PLUGINS_ANNOTATION: &str = "wasm-controller-manager.io/plugins";

/// A Lease unchanged for this many lease durations belongs to a replica long gone
/// (killed, so it could not delete it): it is deleted.
const FORGOTTEN_AFTER: u32 = 20;

/// This replica's membership and its view of the others'.
pub struct Membership {
    me: Elector,
    api: Api<Lease>,
    group: String,
    seen: BTreeMap<String, Observation>,
}

impl Membership {
    /// The membership of `config.identity` in the group `config.lease_name`.
    pub fn new(client: Client, config: &ElectionConfig) -> Membership {
        let own = ElectionConfig {
            lease_name: lease_name(&config.lease_name, &config.identity),
            ..config.clone()
        };
        let labels = [(MEMBER_LABEL.to_string(), config.lease_name.clone())];
        Membership {
            me: Elector::new(client.clone(), own).labelled(labels.into()),
            api: Api::namespaced(client, &config.lease_namespace),
            group: config.lease_name.clone(),
            seen: BTreeMap::new(),
        }
    }

    /// Renews this replica's membership Lease (creating it at first), saying it runs
    /// `plugins`; whether it holds the Lease now.
    pub async fn renew(&mut self, plugins: &[String]) -> Result<bool, kube::Error> {
        self.me.annotate(PLUGINS_ANNOTATION, &plugins.join(","));
        Ok(self.me.try_acquire_or_renew().await? == Attempt::Leading)
    }

    /// The live members (this one included once its Lease is written) and the
    /// plugins each runs. Leases long unchanged are deleted on the way.
    pub async fn live(&mut self) -> Result<BTreeMap<String, BTreeSet<String>>, kube::Error> {
        let selector = format!("{MEMBER_LABEL}={}", self.group);
        let leases = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await?;
        let now = Instant::now();
        let mut live = BTreeMap::new();
        let mut seen = BTreeMap::new();
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let observed = observe(self.seen.get(&name), to_record(&lease), now);
            let record = &observed.record;
            let duration = seconds(record.lease_duration_seconds);
            if !record.holder.is_empty() && observed.changed_at + duration > now {
                live.insert(record.holder.clone(), runs(&lease));
            } else if observed.changed_at + duration * FORGOTTEN_AFTER <= now {
                self.forget(&name, &lease).await;
            }
            seen.insert(name, observed);
        }
        self.seen = seen;
        Ok(live)
    }

    /// Deletes this replica's membership Lease: the others reassign its plugins at
    /// their next look instead of a lease duration later.
    pub async fn leave(&mut self) {
        let name = self.me.lease_name().to_string();
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(lease = name, "left the group of replicas"),
            Err(e) => tracing::warn!(lease = name, error = %e, "could not leave the group; \
                the others will see this replica gone once its Lease expires"),
        }
    }

    /// Deletes a dead replica's Lease, unless it changed since it was read.
    async fn forget(&self, name: &str, lease: &Lease) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        if self.api.delete(name, &params).await.is_ok() {
            tracing::info!(
                lease = name,
                "deleted the membership Lease of a replica long gone"
            );
        }
    }
}

/// The plugins a membership Lease says its replica runs.
fn runs(lease: &Lease) -> BTreeSet<String> {
    let annotations = lease.metadata.annotations.as_ref();
    let list = annotations.and_then(|a| a.get(PLUGINS_ANNOTATION));
    let names = list.map(|l| l.split(',').filter(|p| !p.is_empty()));
    names.into_iter().flatten().map(str::to_string).collect()
}

/// `<group>-member-<12 hex digits of SHA-256 of the identity>`: an identity may hold
/// characters a Lease's name may not (`_`), and a hash keeps the name short.
pub fn lease_name(group: &str, identity: &str) -> String {
    let hex = crate::sha256::hex_of(identity.as_bytes());
    format!("{group}-member-{}", &hex[..12])
}

fn seconds(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_membership_lease_is_named_by_a_hash_of_the_identity() {
        let name = lease_name("wasm-controller-manager", "pod-7d9_abcdefgh");
        assert!(name.starts_with("wasm-controller-manager-member-"));
        assert_eq!(name.len(), "wasm-controller-manager-member-".len() + 12);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert_ne!(
            name,
            lease_name("wasm-controller-manager", "pod-7d9_abcdefgi")
        );
    }
}
