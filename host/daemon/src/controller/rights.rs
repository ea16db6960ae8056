//! A plugin's rights as RBAC grants them. The rules its registration implies (those
//! `wasm-controller-manager rbac` generates for it, with API discovery's resource
//! names) are reviewed for its ServiceAccount when it loads and every review interval
//! while it runs: a plugin that may not list and watch what it watches does not start,
//! and one that loses such a right stops being served that kind until it is granted.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kube::core::GroupVersionKind;

use wcm_core::contract::Registration;
use wcm_core::keys::from_wit_gvk;
use wcm_core::kube::discovery::{DiscoveryError, KindResolver, ResolvedKind};
use wcm_core::rights::access::{AccessReviewer, ReviewError, Rule};
use wcm_core::rights::{Granted, Review};
use wcm_core::rights::{RbacKind, plugin_rights_with, rbac_kind};

/// The rules a registration implies.
#[derive(Debug)]
pub struct DeclaredRights {
    /// Per informer (registration order, one per namespace a watch names): `list`
    /// and `watch` where it watches.
    reads: Vec<Vec<Rule>>,
    /// Every rule, reads included, as `rbac` generates them; sorted.
    all: Vec<Rule>,
}

/// A plugin may not read what it watches: it is not started until RBAC grants it.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ForbiddenError {
    /// The plugin.
    pub plugin: String,
    /// The user it acts as.
    pub user: String,
    /// The read rules it lacks.
    pub missing: Vec<Rule>,
    /// Every rule it declared against those denied.
    pub review: Review,
}

impl fmt::Display for ForbiddenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let missing: Vec<String> = self.missing.iter().map(ToString::to_string).collect();
        write!(
            f,
            "forbidden: plugin {} acts as {}, which is not granted: {} (it starts once RBAC \
             grants it)",
            self.plugin,
            self.user,
            missing.join("; ")
        )
    }
}

impl DeclaredRights {
    /// The rules of `registration`, with resource names and scopes from discovery
    /// (a watched kind that is not served is an error; a written one falls back to
    /// the built-in table, as its writes will fail anyway).
    pub async fn of(
        registration: &Registration,
        resolver: &KindResolver,
    ) -> Result<DeclaredRights, DiscoveryError> {
        // Every kind at once: on a fresh host each is a discovery request.
        let watched: Vec<GroupVersionKind> = (registration.watches.iter())
            .map(|w| from_wit_gvk(&w.kind))
            .collect();
        let declared: Vec<GroupVersionKind> = (registration.permissions.iter())
            .map(|p| from_wit_gvk(&p.kind))
            .filter(|gvk| !watched.contains(gvk))
            .collect();
        let (watched_kinds, declared_kinds) = tokio::join!(
            futures::future::join_all(watched.iter().map(|gvk| resolver.resolve(gvk))),
            futures::future::join_all(declared.iter().map(|gvk| resolver.resolve(gvk))),
        );
        let mut kinds: HashMap<GroupVersionKind, RbacKind> = HashMap::new();
        for (gvk, resolved) in watched.into_iter().zip(watched_kinds) {
            kinds.insert(gvk, rbac_kind_of(&resolved?));
        }
        // A declared kind the API server does not serve is named as RBAC would name it.
        for (gvk, resolved) in declared.into_iter().zip(declared_kinds) {
            if let Ok(resolved) = resolved {
                kinds.insert(gvk, rbac_kind_of(&resolved));
            }
        }
        let lookup =
            |gvk: &GroupVersionKind| kinds.get(gvk).cloned().unwrap_or_else(|| rbac_kind(gvk));
        let informers = (registration.watches.iter()).flat_map(|watch| {
            (watch.informer_namespaces().into_iter()).map(|namespace| (&watch.kind, namespace))
        });
        let reads = informers
            .map(|(kind, namespace)| {
                let kind = lookup(&from_wit_gvk(kind));
                let namespace = namespace.filter(|_| kind.namespaced);
                ["list", "watch"]
                    .map(|verb| Rule {
                        verb: verb.to_string(),
                        group: kind.group.clone(),
                        resource: kind.resource.clone(),
                        namespace: namespace.clone(),
                    })
                    .to_vec()
            })
            .collect();
        let rights = plugin_rights_with(registration, &lookup).rights;
        let all = (rights.iter())
            .flat_map(|(target, verbs)| {
                verbs.iter().map(move |verb| Rule {
                    verb: verb.to_string(),
                    group: target.group.clone(),
                    resource: target.resource.clone(),
                    namespace: target.namespace.clone(),
                })
            })
            .collect();
        Ok(DeclaredRights { reads, all })
    }

    /// Reviews every rule for `plugin`: the read rules each watch lacks, and every
    /// declared rule against the denied ones.
    pub async fn review(
        &self,
        reviewer: &AccessReviewer,
        plugin: &str,
    ) -> Result<(Vec<Vec<Rule>>, Review), ReviewError> {
        // The reads too: a cluster-wide rule may have absorbed a namespaced read.
        let rules: BTreeSet<&Rule> = self.all.iter().chain(self.reads.iter().flatten()).collect();
        let rules: Vec<Rule> = rules.into_iter().cloned().collect();
        let (denied, impersonate) = tokio::try_join!(
            reviewer.denied(plugin, &rules),
            reviewer.host_may_impersonate(plugin)
        )?;
        let closed = (self.reads.iter())
            .map(|reads| {
                reads
                    .iter()
                    .filter(|r| denied.contains(r))
                    .cloned()
                    .collect()
            })
            .collect();
        let denied = denied
            .into_iter()
            .filter(|r| self.all.contains(r))
            .collect();
        let review = Review {
            declared: self.all.len(),
            denied,
            host_cannot_impersonate: !impersonate,
        };
        Ok((closed, review))
    }
}

/// A resolved kind as RBAC names it.
fn rbac_kind_of(resolved: &ResolvedKind) -> RbacKind {
    RbacKind {
        group: resolved.resource.group.clone(),
        resource: resolved.resource.plural.clone(),
        namespaced: resolved.namespaced,
        known: true,
    }
}

/// Reviews a plugin's rights when it loads: `Forbidden` if it may not read what it
/// watches; a warning if it lacks a rule it declared for writing (those writes will
/// be refused by the API server, and the table shows it).
pub async fn review_at_load(
    registration: &Registration,
    reviewer: &AccessReviewer,
    resolver: &KindResolver,
) -> Result<(DeclaredRights, Granted), super::StartError> {
    let declared = DeclaredRights::of(registration, resolver).await?;
    let plugin = &registration.name;
    let (closed, review) = declared.review(reviewer, plugin).await?;
    let mut missing: Vec<Rule> = closed.iter().flatten().cloned().collect();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        return Err(super::StartError::Forbidden(Box::new(ForbiddenError {
            plugin: plugin.clone(),
            user: reviewer.user(plugin),
            missing,
            review,
        })));
    }
    if !review.denied.is_empty() {
        tracing::warn!(plugin, user = %reviewer.user(plugin), denied = %rules(&review.denied),
            "the plugin's ServiceAccount lacks rules the plugin declared; those calls will be refused");
    }
    if review.host_cannot_impersonate {
        tracing::warn!(plugin, user = %reviewer.user(plugin),
            "the host may not impersonate the plugin's ServiceAccount; its writes and Events \
             will be refused until the plugin's RBAC is applied");
    }
    Ok((declared, Granted::reviewed(closed, review)))
}

/// The shortest time between two reviews of one plugin, however often reviews are
/// asked for (each is a SubjectAccessReview per rule).
const MIN_REVIEW_GAP: Duration = Duration::from_secs(1);

/// Re-reviews `plugin`'s rights every `every`, and at once when asked (a write refused
/// as forbidden, a change of RBAC), applies them to `granted` and logs what changed.
/// A review that fails leaves the last one standing.
pub async fn keep_reviewing(
    reviewer: AccessReviewer,
    plugin: String,
    declared: Arc<DeclaredRights>,
    granted: Arc<Granted>,
    every: Duration,
) {
    let start = tokio::time::Instant::now() + every;
    let mut ticks = tokio::time::interval_at(start, every);
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = granted.review_asked() => {
                tokio::time::sleep_until(last + MIN_REVIEW_GAP).await;
            }
        }
        last = tokio::time::Instant::now();
        match declared.review(&reviewer, &plugin).await {
            Ok((closed, review)) => {
                log_changes(&plugin, &granted, &closed, &review);
                granted.update(closed, review);
            }
            Err(error) => tracing::warn!(plugin, %error,
                "cannot review the plugin's rights; the last review stands"),
        }
    }
}

fn log_changes(plugin: &str, granted: &Granted, closed: &[Vec<Rule>], review: &Review) {
    match (
        granted.host_cannot_impersonate(),
        review.host_cannot_impersonate,
    ) {
        (false, true) => tracing::warn!(
            plugin,
            "the host may no longer impersonate the plugin's ServiceAccount; its writes fail"
        ),
        (true, false) => tracing::info!(plugin, "the host may impersonate the plugin again"),
        _ => {}
    }
    let before = granted.review().map(|r| r.denied).unwrap_or_default();
    let lost: Vec<Rule> = (review.denied.iter())
        .filter(|r| !before.contains(r))
        .cloned()
        .collect();
    let regained: Vec<Rule> = before
        .into_iter()
        .filter(|r| !review.denied.contains(r))
        .collect();
    let closes = closed.iter().flatten().any(|r| lost.contains(r));
    if closes {
        tracing::warn!(plugin, lost = %rules(&lost),
            "the plugin lost a right it needs to read what it watches; it is no longer served that kind");
    } else if !lost.is_empty() {
        tracing::warn!(plugin, lost = %rules(&lost), "the plugin lost rights it declared");
    }
    if !regained.is_empty() {
        tracing::info!(plugin, granted = %rules(&regained), "the plugin was granted rights it declared");
    }
}

/// Rules as one log field.
pub fn rules(rules: &[Rule]) -> String {
    let rules: Vec<String> = rules.iter().map(ToString::to_string).collect();
    rules.join("; ")
}
