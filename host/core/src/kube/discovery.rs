//! Resolves a plugin's group/version/kind to an API resource through API discovery.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope, pinned_kind};

/// A kind the API server serves: its resource (plural, ...) and scope.
#[derive(Debug, Clone)]
pub struct ResolvedKind {
    /// Group, version, kind and plural resource name.
    pub resource: ApiResource,
    /// True for namespaced kinds (Pod), false for cluster-scoped ones (Node).
    pub namespaced: bool,
}

/// How long a failed lookup is remembered: a plugin looping over a kind that is not
/// served (a bogus group it declared) costs one discovery request per this period,
/// not one per call; a CRD installed meanwhile is seen at most this late.
pub const NOT_SERVED_TTL: Duration = Duration::from_secs(5);

/// A kind could not be resolved.
#[derive(Debug, Clone, thiserror::Error)]
#[error("kind {gvk} is not served by the API server: {reason}")]
pub struct DiscoveryError {
    /// The kind as `group/version/Kind`.
    pub gvk: String,
    /// What discovery answered.
    pub reason: String,
    /// The API server does not serve the kind (yet): its group/version is unknown
    /// (404) or lacks the kind, as before a CRD is installed.
    not_served: bool,
}

impl DiscoveryError {
    fn new(gvk: &GroupVersionKind, source: &kube::Error) -> DiscoveryError {
        DiscoveryError {
            gvk: display_gvk(gvk),
            reason: source.to_string(),
            not_served: match source {
                kube::Error::Api(status) => status.code == 404,
                kube::Error::Discovery(_) => true,
                _ => false,
            },
        }
    }

    /// Whether the API server simply does not serve the kind (yet): its group/version
    /// is unknown (404) or lacks the kind, as before a CRD is installed.
    pub fn is_not_served(&self) -> bool {
        self.not_served
    }
}

/// Renders a kind the way logs and errors show it: `v1/Pod`, `apps/v1/Deployment`.
pub fn display_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

/// Splits an apiVersion into group and version: `apps/v1` → (`apps`, `v1`), `v1` →
/// (``, `v1`) for the core group.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// Discovery with a cache: each kind is looked up once per host run, and a kind that
/// is not served at most once per [`NOT_SERVED_TTL`].
pub struct KindResolver {
    client: Client,
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    served: HashMap<GroupVersionKind, ResolvedKind>,
    failed: HashMap<GroupVersionKind, (Instant, DiscoveryError)>,
}

impl Known {
    /// What is known of `gvk` now: resolved, or a failure not yet expired.
    fn of(&mut self, gvk: &GroupVersionKind) -> Option<Result<ResolvedKind, DiscoveryError>> {
        if let Some(found) = self.served.get(gvk) {
            return Some(Ok(found.clone()));
        }
        let now = Instant::now();
        self.failed
            .retain(|_, (at, _)| now.duration_since(*at) < NOT_SERVED_TTL);
        self.failed.get(gvk).map(|(_, e)| Err(e.clone()))
    }
}

impl KindResolver {
    /// A resolver asking the API server behind `client`.
    pub fn new(client: Client) -> KindResolver {
        KindResolver {
            client,
            known: Mutex::new(Known::default()),
        }
    }

    /// Whether resolving `gvk` now would be answered without a request.
    pub fn knows(&self, gvk: &GroupVersionKind) -> bool {
        self.lock().of(gvk).is_some()
    }

    /// Resolves `gvk`, from the cache when it was seen before.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<ResolvedKind, DiscoveryError> {
        if let Some(known) = self.lock().of(gvk) {
            return known;
        }
        let found = pinned_kind(&self.client, gvk).await;
        let mut known = self.lock();
        match found {
            Ok((resource, caps)) => {
                let resolved = ResolvedKind {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                };
                known.served.insert(gvk.clone(), resolved.clone());
                Ok(resolved)
            }
            Err(source) => {
                let error = DiscoveryError::new(gvk, &source);
                known
                    .failed
                    .insert(gvk.clone(), (Instant::now(), error.clone()));
                Err(error)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}
