//! The group of replicas in `--leader-elect-mode=per-plugin`: each renews a Lease of
//! its own (`<name>-member-<hash of its identity>`, `holderIdentity` = its identity,
//! labelled `wasm-controller-manager.io/member=<name>`), and reads the others' to
//! know who is live, as one watch sees them (`lease_watch`). Liveness is judged as
//! the election judges a Lease: by when this replica saw a record change, on its own
//! clock, never by comparing another machine's timestamps with its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DeleteParams, Preconditions};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::config::ElectionConfig;
use super::elector::{Attempt, Elector};
use super::lease_watch::LeaseWatch;

/// The label naming the group a membership Lease belongs to.
pub const MEMBER_LABEL: &str = "wasm-controller-manager.io/member";

/// The annotation listing the plugins a member runs (comma-separated): a plugin is
/// assigned only among the members that run it, so one that failed to load on a
/// replica, or that a replica of another version lacks, is never left to it.
pub const PLUGINS_ANNOTATION: &str = "wasm-controller-manager.io/plugins";

/// The annotation saying whether a member has watched the group for a lease duration
/// (`true`) or joined since (`false`): only one that has can judge at once whether a
/// crashed replica's Lease ran out, so only such members take those plugins over.
pub const SETTLED_ANNOTATION: &str = "wasm-controller-manager.io/settled";

/// A Lease unchanged for this many lease durations belongs to a replica long gone
/// (killed, so it could not delete it): it is deleted.
const FORGOTTEN_AFTER: u32 = 20;

/// The group as one replica sees it.
#[derive(Debug, Default)]
pub struct Live {
    /// Each live member and the plugins it runs.
    pub runs: BTreeMap<String, BTreeSet<String>>,
    /// The live members that joined less than a lease duration ago.
    pub unsettled: BTreeSet<String>,
}

/// This replica's membership and its view of the others'.
pub struct Membership {
    me: Elector,
    api: Api<Lease>,
    watch: LeaseWatch,
}

impl Membership {
    /// The membership of `config.identity` in the group `config.lease_name`; the
    /// group's Leases are watched from now on, `handed` notified when one changes
    /// hands (a member joins, leaves or is replaced).
    pub fn new(client: Client, config: &ElectionConfig, handed: Arc<Notify>) -> Membership {
        let own = ElectionConfig {
            lease_name: lease_name(&config.lease_name, &config.identity),
            ..config.clone()
        };
        let labels = [(MEMBER_LABEL.to_string(), config.lease_name.clone())];
        let api = Api::namespaced(client.clone(), &config.lease_namespace);
        let selector = format!("{MEMBER_LABEL}={}", config.lease_name);
        Membership {
            me: Elector::new(client, own).labelled(labels.into()),
            watch: LeaseWatch::start(api.clone(), &selector, config.lease_duration, handed),
            api,
        }
    }

    /// Renews this replica's membership Lease (creating it at first), saying it runs
    /// `plugins` and whether it is `settled`; whether it holds the Lease now.
    pub async fn renew(&mut self, plugins: &[String], settled: bool) -> Result<bool, kube::Error> {
        self.me.annotate(PLUGINS_ANNOTATION, &plugins.join(","));
        self.me.annotate(SETTLED_ANNOTATION, &settled.to_string());
        Ok(self.me.try_acquire_or_renew().await? == Attempt::Leading)
    }

    /// When the group's Leases were first listed: before that, who is live is
    /// unknown.
    pub fn synced_at(&self) -> Option<Instant> {
        self.watch.synced_at()
    }

    /// The live members (this one included once its Lease is written): those whose
    /// Lease has not run out since this replica saw its last renewal, with the
    /// plugins each runs and whether it says it joined less than a lease duration
    /// ago.
    pub fn live(&self) -> Live {
        let now = Instant::now();
        let mut live = Live::default();
        for watched in self.watch.leases().into_values().filter(|w| w.held_at(now)) {
            let member = watched.observed.record.holder.clone();
            let annotations = watched.lease.metadata.annotations.as_ref();
            let settled = annotations.and_then(|a| a.get(SETTLED_ANNOTATION));
            if settled.is_some_and(|s| s == "false") {
                live.unsettled.insert(member.clone());
            }
            live.runs.insert(member, runs(&watched.lease));
        }
        live
    }

    /// When another member's Lease runs out next, as this replica judges it.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.watch.next_expiry(self.me.identity())
    }

    /// Deletes the Leases unchanged for [`FORGOTTEN_AFTER`] lease durations.
    pub async fn forget_gone(&self) {
        let now = Instant::now();
        for (name, watched) in self.watch.leases() {
            let observed = &watched.observed;
            if observed.changed_at + observed.duration() * FORGOTTEN_AFTER <= now {
                self.forget(&name, &watched.lease).await;
            }
        }
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
    let hex = wcm_core::sha256::hex_of(identity.as_bytes());
    format!("{group}-member-{}", &hex[..12])
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
