//! Pushing a plugin to an OCI registry and pulling one from it, in the CNCF Wasm
//! layout, over TLS with the system's roots and any CA the operator adds.
//!
//! A pull is bounded before it is trusted: the registry must be one the operator
//! allows, every answer is read within its bound (`limits`), the pull as a whole
//! within its deadline, the manifest must describe one layer of a Wasm media type
//! whose declared size is within the bound, and the manifest and the layer are checked
//! against their digests. Written on `reqwest` rather than taken from `oci-client`:
//! that client reads manifests, token replies and error bodies whole (its issue #206
//! asks for a bound), copies error bodies into its errors, follows redirects to any
//! scheme, and keeps the first credentials it sees for a registry host for the life
//! of the process, which let one `WasmPlugin` pull with another's.

use std::collections::BTreeSet;

use tokio::sync::Semaphore;

use super::layout::{ACCEPTED_LAYERS, WASM_CONFIG, WASM_LAYER, WasmConfig};
use super::limits::{RegistryLimits, RegistryOptions};
use super::manifest::{Descriptor, Manifest, OCI_MANIFEST, digest_of};
use super::session::{Access, Parts, Session};
use super::{Reference, RegistryAuth, RegistryError, http::Transport};

/// A plugin pulled from a registry.
#[derive(Debug)]
pub struct Pulled {
    /// The manifest's digest (`sha256:...`): what a tag resolved to.
    pub digest: String,
    /// The layer's media type.
    pub media_type: String,
    /// The component.
    pub bytes: Vec<u8>,
}

/// A client for the registries plugins live in.
pub struct Registry {
    transport: Transport,
    limits: RegistryLimits,
    allowed: Option<BTreeSet<String>>,
    /// Turns of the pulls that run at once.
    turns: Semaphore,
    /// KiB of components the pulls in flight may hold together.
    memory: Semaphore,
}

impl Registry {
    /// A client trusting the system's roots and the PEM certificates in `ca_files`,
    /// with the default bounds.
    pub fn new(ca_files: &[std::path::PathBuf]) -> Result<Registry, RegistryError> {
        Registry::with(RegistryOptions::with_ca_files(ca_files))
    }

    /// A client as `options` say.
    pub fn with(options: RegistryOptions) -> Result<Registry, RegistryError> {
        let limits = options.limits;
        let transport = Transport::new(&options.ca_files, options.plain_http, limits.max_redirects)
            .map_err(|why| RegistryError::Setup { why })?;
        let kib = usize::try_from(limits.max_pull_memory_bytes >> 10).unwrap_or(usize::MAX);
        Ok(Registry {
            transport,
            turns: Semaphore::new(limits.max_concurrent_pulls.max(1)),
            memory: Semaphore::new(kib.clamp(1, Semaphore::MAX_PERMITS)),
            allowed: options.allowed,
            limits,
        })
    }

    /// Whether the operator lets plugins come from `reference`'s registry
    /// (`--allowed-registries`): checked before a pull and before a plugin is taken
    /// from the disk, so narrowing the list stops what came from elsewhere.
    pub fn check_allowed(&self, reference: &Reference) -> Result<(), RegistryError> {
        let registry = reference.resolve_registry();
        match &self.allowed {
            Some(allowed) if !allowed.contains(registry) => Err(RegistryError::NotAllowed {
                reference: reference.to_string(),
                registry: registry.to_string(),
                allowed: allowed.iter().cloned().collect::<Vec<_>>().join(", "),
            }),
            _ => Ok(()),
        }
    }

    /// A session for `reference`'s repository with `credentials`, once one of the
    /// pulls' turns is free; refused for a registry the operator does not allow.
    pub async fn session(
        &self,
        reference: &Reference,
        credentials: RegistryAuth,
        access: Access,
    ) -> Result<Session<'_>, RegistryError> {
        self.check_allowed(reference)?;
        let parts = Parts {
            transport: &self.transport,
            limits: &self.limits,
            memory: &self.memory,
        };
        Session::open(parts, &self.turns, reference, credentials, access).await
    }

    /// Pushes `component` to `reference` (a tag) in the CNCF layout; returns the
    /// manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        component: Vec<u8>,
        auth: &RegistryAuth,
    ) -> Result<String, RegistryError> {
        let layer_digest = digest_of(&component);
        let config = WasmConfig::of(&component, layer_digest.clone())?.to_bytes();
        let descriptor = |media_type: &str, bytes: &[u8]| Descriptor {
            media_type: media_type.to_string(),
            digest: digest_of(bytes),
            size: bytes.len() as u64,
            annotations: None,
        };
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.to_string()),
            config: descriptor(WASM_CONFIG, &config),
            layers: vec![descriptor(WASM_LAYER, &component)],
        };
        let mut session = self.session(reference, auth.clone(), Access::Push).await?;
        session.upload(&manifest.config.digest, config).await?;
        session.upload(&layer_digest, component).await?;
        session.put_manifest(&manifest).await
    }

    /// The manifest digest `reference` (a tag) names now.
    pub async fn resolve(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<String, RegistryError> {
        let mut session = self.session(reference, auth.clone(), Access::Pull).await?;
        session.resolve().await
    }

    /// Pulls the component at `reference`, refusing one over `max_bytes`.
    pub async fn pull(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        max_bytes: u64,
    ) -> Result<Pulled, RegistryError> {
        let mut session = self.session(reference, auth.clone(), Access::Pull).await?;
        pull(&mut session, reference, max_bytes).await
    }
}

/// Pulls the component at `reference` in `session`, refusing one over `max_bytes`.
pub async fn pull(
    session: &mut Session<'_>,
    reference: &Reference,
    max_bytes: u64,
) -> Result<Pulled, RegistryError> {
    let named = reference.digest().or(reference.tag()).unwrap_or("latest");
    let (manifest, digest) = session.manifest(named).await?;
    let [layer] = manifest.layers.as_slice() else {
        let layers = manifest.layers.len();
        return Err(RegistryError::Layers {
            reference: reference.to_string(),
            layers,
        });
    };
    if !ACCEPTED_LAYERS.contains(&layer.media_type.as_str()) {
        return Err(RegistryError::MediaType {
            reference: reference.to_string(),
            media_type: crate::logs::escape_cut(&layer.media_type, 120).0,
        });
    }
    let bytes = session.blob(layer, max_bytes).await?;
    Ok(Pulled {
        digest,
        media_type: layer.media_type.clone(),
        bytes,
    })
}
