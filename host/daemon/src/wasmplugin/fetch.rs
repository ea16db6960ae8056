//! A `WasmPlugin`'s component: its reference chosen (the digest status pinned for the
//! same `spec.image`, else `spec.image`), and the component taken from the disk store
//! when it is held there intact and verified, else pulled in one session with the
//! credentials of the `WasmPlugin`'s own pull Secret as it is now. Every replica
//! pulls (reads only), so a standby holds the plugin compiled and ready when it takes
//! over; only the replica that acts for a plugin writes its status.

use std::sync::Arc;

use kube::Client;

use super::WasmPluginSpec;
use super::pull_secret::{PullSecretError, pull_auth};
use wcm_core::registry::{
    self, Access, Fetched, PulledPlugins, Reference, Registry, RegistryAuth, RegistryError,
    Session, SignatureError, TrustedKey, verify,
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
}

impl FetchError {
    /// The condition reason an operator reads.
    pub fn reason(&self) -> &'static str {
        use RegistryError as R;
        match self {
            FetchError::PullSecret(_) => "PullSecretUnusable",
            FetchError::Signature(e) => e.reason(),
            FetchError::Registry(e) => match e {
                R::BadReference { .. } => "InvalidImage",
                R::NotAllowed { .. } => "RegistryNotAllowed",
                R::Unauthorized { .. } => "Unauthorized",
                R::Unreachable { .. } => "RegistryUnreachable",
                R::TimedOut { .. } => "PullTimedOut",
                R::TooLarge { .. } => "TooLarge",
                R::AnswerTooLarge { .. } => "RegistryAnswerTooLarge",
                R::Redirect { .. } => "RedirectRefused",
                R::NotFound { .. } => "NotFound",
                R::MediaType { .. } | R::Layers { .. } => "NotAPlugin",
                _ => "PullFailed",
            },
        }
    }

    /// Whether the pull Secret's content may be the cause: a change of the Secret
    /// tries the pull again at once.
    pub fn credentials_may_fix(&self) -> bool {
        matches!(
            self,
            FetchError::PullSecret(_) | FetchError::Registry(RegistryError::Unauthorized { .. })
        )
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

    /// Checks the signatures of manifest `digest` by `keys`, unless this disk already
    /// did (a record under each key's whole digest).
    async fn verified(
        &self,
        session: &mut Session<'_>,
        digest: &str,
        keys: &[TrustedKey],
    ) -> Result<(), FetchError> {
        for key in keys {
            if self.store.is_verified(digest, key.digest()).await {
                continue;
            }
            verify(session, digest, key).await?;
            self.store.mark_verified(digest, key.digest()).await;
        }
        Ok(())
    }

    /// The component of `spec`, pinned as `pinned` says when that pin is for the same
    /// image: from the disk when held there intact, verified by every key and once
    /// read from the registry with these same credentials; else through the registry
    /// (which for a component on the disk only says these credentials may read it).
    pub async fn fetch(
        &self,
        spec: &WasmPluginSpec,
        pinned: Option<&str>,
    ) -> Result<FetchedPlugin, FetchError> {
        let reference = registry::reference(&reference_for(&spec.image, pinned))?;
        self.registry.check_allowed(&reference)?;
        let keys = self.keys_for(spec)?;
        let auth = self.auth_for(spec, &reference).await?;
        let credentials = auth.fingerprint(reference.resolve_registry());
        if let Some(held) = self.held(&reference, &keys, &credentials).await {
            return Ok(FetchedPlugin {
                pinned: pin(&spec.image, &held.digest),
                fetched: held,
            });
        }
        let mut session = self
            .registry
            .session(&reference, auth, Access::Pull)
            .await?;
        // A request even for a digest: the registry says whether these credentials
        // may read it, whatever the disk holds.
        let digest = session.resolve().await?;
        let reference = reference.clone_with_digest(digest.clone());
        // Before anything is pulled or compiled.
        self.verified(&mut session, &digest, &keys).await?;
        let fetched = self
            .store
            .fetch(&mut session, &reference, self.max_bytes)
            .await?;
        self.store
            .mark_readable_with(&fetched.digest, &credentials)
            .await;
        Ok(FetchedPlugin {
            pinned: pin(&spec.image, &fetched.digest),
            fetched,
        })
    }

    /// The credentials of `spec`'s pull Secret as it is now, for `reference`'s
    /// registry; anonymous without one.
    async fn auth_for(
        &self,
        spec: &WasmPluginSpec,
        reference: &Reference,
    ) -> Result<RegistryAuth, FetchError> {
        match &spec.pull_secret {
            Some(name) => {
                let registry = reference.resolve_registry();
                Ok(pull_auth(&self.client, &self.namespace, name, registry).await?)
            }
            None => Ok(RegistryAuth::Anonymous),
        }
    }

    /// What this disk holds of `reference` (pinned to a digest): intact, verified by
    /// every key, and read from the registry with `credentials` before; then no
    /// registry is asked. A component another `WasmPlugin`'s credentials pulled is
    /// not handed to one whose credentials the registry has not let read it.
    async fn held(
        &self,
        reference: &Reference,
        keys: &[TrustedKey],
        credentials: &str,
    ) -> Option<Fetched> {
        let fetched = self.store.fetch_cached(reference).await?;
        if !self
            .store
            .is_readable_with(&fetched.digest, credentials)
            .await
        {
            return None;
        }
        for key in keys {
            if !self.store.is_verified(&fetched.digest, key.digest()).await {
                return None;
            }
        }
        Some(fetched)
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
