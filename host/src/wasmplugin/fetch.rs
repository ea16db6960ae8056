//! A `WasmPlugin`'s component: its reference chosen (the digest status pinned for the
//! same `spec.image`, else `spec.image`), its pull Secret read, and the component
//! taken from the disk store or pulled — by the leading replica only.

use std::sync::Arc;

use kube::Client;

use super::WasmPluginSpec;
use super::pull_secret::{PullSecretError, pull_auth};
use crate::registry::{
    self, Fetched, PulledPlugins, Reference, Registry, RegistryAuth, RegistryError, SignatureError,
    TrustedKey, verify,
};

/// Why a `WasmPlugin`'s component could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The pull Secret gave no credentials.
    #[error(transparent)]
    PullSecret(#[from] PullSecretError),
    /// The registry refused or failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A signature the policy requires is missing or wrong, or its key unusable.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// This replica does not lead, and the digest is not on its disk yet.
    #[error("not pulled yet: only the leading replica pulls from registries")]
    NotLeading,
}

impl FetchError {
    /// The condition reason an operator reads.
    pub fn reason(&self) -> &'static str {
        match self {
            FetchError::Registry(RegistryError::BadReference { .. }) => "InvalidImage",
            FetchError::PullSecret(_) => "PullSecretUnusable",
            FetchError::Registry(RegistryError::Unauthorized { .. }) => "Unauthorized",
            FetchError::Registry(RegistryError::Unreachable { .. }) => "RegistryUnreachable",
            FetchError::Registry(RegistryError::TooLarge { .. }) => "TooLarge",
            FetchError::Registry(RegistryError::NotFound { .. }) => "NotFound",
            FetchError::Registry(
                RegistryError::MediaType { .. } | RegistryError::Layers { .. },
            ) => "NotAPlugin",
            FetchError::Registry(_) => "PullFailed",
            FetchError::Signature(e) => e.reason(),
            FetchError::NotLeading => "NotLeading",
        }
    }
}

/// What was fetched for one `WasmPlugin`.
#[derive(Debug)]
pub struct FetchedPlugin {
    /// The reference, pinned to the digest fetched: what status records.
    pub pinned: String,
    /// The component and its digest.
    pub fetched: Fetched,
}

/// Fetches `WasmPlugin` components for one host.
#[derive(Clone)]
pub struct Fetcher {
    registry: Arc<Registry>,
    store: PulledPlugins,
    client: Client,
    namespace: String,
    max_bytes: u64,
    /// Keys every plugin must be signed by (`--verify-key`).
    keys: Arc<[TrustedKey]>,
}

impl Fetcher {
    /// Pulls with `registry` into `store`, reads pull Secrets in `namespace` with
    /// `client`, refuses components over `max_bytes`.
    pub fn new(
        registry: Registry,
        store: PulledPlugins,
        client: Client,
        namespace: &str,
        max_bytes: u64,
    ) -> Fetcher {
        Fetcher {
            registry: Arc::new(registry),
            store,
            client,
            namespace: namespace.to_string(),
            max_bytes,
            keys: Arc::new([]),
        }
    }

    /// This fetcher, requiring every plugin to be signed by each of `keys` too.
    pub fn requiring(mut self, keys: Vec<TrustedKey>) -> Fetcher {
        self.keys = keys.into();
        self
    }

    /// The keys `spec` must be signed by: the host's, and its own.
    fn keys_for(&self, spec: &WasmPluginSpec) -> Result<Vec<TrustedKey>, FetchError> {
        let mut keys = self.keys.to_vec();
        if let Some(verify) = &spec.verify {
            keys.push(TrustedKey::from_pem(
                &verify.public_key,
                "spec.verify.publicKey",
            )?);
        }
        Ok(keys)
    }

    /// Checks `reference`'s signatures by `keys`, unless this disk already did.
    async fn verified(
        &self,
        reference: &Reference,
        digest: &str,
        auth: &RegistryAuth,
        keys: &[TrustedKey],
    ) -> Result<(), FetchError> {
        for key in keys {
            if self.store.is_verified(digest, key.name()).await {
                continue;
            }
            verify(&self.registry, reference, digest, auth, key).await?;
            self.store.mark_verified(digest, key.name()).await;
        }
        Ok(())
    }

    /// The component of `spec`, pinned as `pinned` says when that pin is for the same
    /// image; pulled only if `leading`.
    pub async fn fetch(
        &self,
        spec: &WasmPluginSpec,
        pinned: Option<&str>,
        leading: bool,
    ) -> Result<FetchedPlugin, FetchError> {
        let reference = registry::reference(&reference_for(&spec.image, pinned))?;
        let keys = self.keys_for(spec)?;
        if !leading {
            return self.fetch_held(spec, &reference, &keys).await;
        }
        let auth = match &spec.pull_secret {
            Some(name) => {
                let registry = reference.resolve_registry();
                pull_auth(&self.client, &self.namespace, name, registry).await?
            }
            None => RegistryAuth::Anonymous,
        };
        let reference = match reference.digest() {
            Some(_) => reference,
            None => reference.clone_with_digest(self.registry.resolve(&reference, &auth).await?),
        };
        let digest = reference.digest().unwrap_or_default().to_string();
        // Before anything is pulled or compiled.
        self.verified(&reference, &digest, &auth, &keys).await?;
        let fetched = (self
            .store
            .fetch(&self.registry, &reference, &auth, self.max_bytes))
        .await?;
        Ok(FetchedPlugin {
            pinned: pin(&spec.image, &fetched.digest),
            fetched,
        })
    }

    /// A standby's fetch: only what this disk holds, verified on it by every key.
    async fn fetch_held(
        &self,
        spec: &WasmPluginSpec,
        reference: &Reference,
        keys: &[TrustedKey],
    ) -> Result<FetchedPlugin, FetchError> {
        let fetched = self.store.fetch_cached(reference).await;
        let fetched = fetched.ok_or(FetchError::NotLeading)?;
        for key in keys {
            if !self.store.is_verified(&fetched.digest, key.name()).await {
                return Err(FetchError::NotLeading);
            }
        }
        Ok(FetchedPlugin {
            pinned: pin(&spec.image, &fetched.digest),
            fetched,
        })
    }
}

/// What to fetch: `image` if it names a digest itself; else the pin status recorded
/// for this same `image` (a tag is resolved once); else `image`, resolved now.
pub fn reference_for(image: &str, pinned: Option<&str>) -> String {
    if image.contains('@') {
        return image.to_string();
    }
    match pinned {
        Some(pin)
            if pin
                .strip_prefix(image)
                .is_some_and(|rest| rest.starts_with('@')) =>
        {
            pin.to_string()
        }
        _ => image.to_string(),
    }
}

/// `image` pinned to `digest`: `image@digest`, or `image` if it names a digest.
fn pin(image: &str, digest: &str) -> String {
    match image.contains('@') {
        true => image.to_string(),
        false => format!("{image}@{digest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "r.example/p:v1@sha256:aa";

    #[test]
    fn a_tag_is_resolved_once_and_a_digest_taken_as_it_is() {
        assert_eq!(reference_for("r.example/p:v1", None), "r.example/p:v1");
        assert_eq!(reference_for("r.example/p:v1", Some(PIN)), PIN);
        // Another image (a new tag) is resolved anew, whatever was pinned before.
        assert_eq!(reference_for("r.example/p:v2", Some(PIN)), "r.example/p:v2");
        assert_eq!(reference_for("r.example/p:v", Some(PIN)), "r.example/p:v");
        let by_digest = "r.example/p@sha256:bb";
        assert_eq!(reference_for(by_digest, Some(PIN)), by_digest);
        assert_eq!(pin("r.example/p:v1", "sha256:aa"), PIN);
        assert_eq!(pin(by_digest, "sha256:bb"), by_digest);
    }
}
