//! Resolves a plugin's group/version/kind to an API resource through API discovery.

use std::collections::HashMap;
use std::sync::Mutex;

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

/// A kind could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("kind {gvk} is not served by the API server: {source}")]
pub struct DiscoveryError {
    /// The kind as `group/version/Kind`.
    pub gvk: String,
    /// What discovery answered.
    #[source]
    pub source: kube::Error,
}

impl DiscoveryError {
    /// Whether the API server simply does not serve the kind (yet): its group/version
    /// is unknown (404) or lacks the kind, as before a CRD is installed.
    pub fn is_not_served(&self) -> bool {
        match &self.source {
            kube::Error::Api(status) => status.code == 404,
            kube::Error::Discovery(_) => true,
            _ => false,
        }
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

/// Discovery with a cache: each kind is looked up once per host run.
pub struct KindResolver {
    client: Client,
    known: Mutex<HashMap<GroupVersionKind, ResolvedKind>>,
}

impl KindResolver {
    /// A resolver asking the API server behind `client`.
    pub fn new(client: Client) -> KindResolver {
        KindResolver {
            client,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// Resolves `gvk`, from the cache when it was seen before.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<ResolvedKind, DiscoveryError> {
        if let Some(found) = self.lock().get(gvk) {
            return Ok(found.clone());
        }
        let (resource, caps) =
            pinned_kind(&self.client, gvk)
                .await
                .map_err(|source| DiscoveryError {
                    gvk: display_gvk(gvk),
                    source,
                })?;
        let resolved = ResolvedKind {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.lock().insert(gvk.clone(), resolved.clone());
        Ok(resolved)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, ResolvedKind>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}
