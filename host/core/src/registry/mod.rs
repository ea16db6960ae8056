//! Plugins in OCI registries: the CNCF Wasm layout they are pushed in, the credentials
//! a registry asks for, a client that pushes and pulls them within bounds, and the
//! on-disk store of what was pulled, by digest. Used by `push` and `pull` on the
//! command line and for `WasmPlugin`s.

mod auth;
mod cache;
mod challenge;
mod client;
mod credential_helper;
mod credentials;
mod http;
mod layout;
mod limits;
mod manifest;
mod refusal;
mod session;
mod signature;
mod upload;

pub use auth::RegistryAuth;
pub use cache::{DEFAULT_MAX_BYTES as DEFAULT_PULLED_MAX_BYTES, Fetched, PulledPlugins};
pub use client::{Pulled, Registry, pull};
pub use credentials::{CredentialsError, DockerConfig};
pub use layout::{ACCEPTED_LAYERS, LEGACY_WASM_LAYER, NotAComponent, WASM_CONFIG, WASM_LAYER};
pub use limits::{
    DEFAULT_CONCURRENT_PULLS, DEFAULT_PULL_MEMORY_BYTES, DEFAULT_PULL_TIMEOUT, MAX_MANIFEST_BYTES,
    MAX_REDIRECTS, MAX_SMALL_ANSWER_BYTES, RegistryLimits, RegistryOptions,
};
pub use manifest::is_sha256;
pub use oci_spec::distribution::Reference;
pub use refusal::Refusal;
pub use session::{Access, Session};
pub use signature::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING, SignatureError, TrustedKey, verify};

use std::time::Duration;

/// Why a push or pull failed; each names the reference and the cause. What a registry
/// said is carried only as its status and its bounded error codes and messages.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The client could not be set up (a CA file unreadable or not PEM).
    #[error("cannot set up the registry client: {why}")]
    Setup {
        /// The cause.
        why: String,
    },
    /// The credentials could not be read.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// The file to push is not a component.
    #[error(transparent)]
    NotAComponent(#[from] NotAComponent),
    /// Not an OCI reference.
    #[error("{reference:?} is not an OCI reference: {why}")]
    BadReference {
        /// The text given (cut).
        reference: String,
        /// The parser's complaint.
        why: String,
    },
    /// The operator does not let plugins come from this registry.
    #[error("{reference}: the registry {registry} is not among --allowed-registries ({allowed})")]
    NotAllowed {
        /// The reference.
        reference: String,
        /// Its registry.
        registry: String,
        /// The registries allowed.
        allowed: String,
    },
    /// The registry has no such manifest (or repository).
    #[error("{reference}: not found in the registry")]
    NotFound {
        /// The reference.
        reference: String,
    },
    /// The registry refused the credentials, or asks for some.
    #[error(
        "{reference}: not authorized: the registry refused the credentials, or wants some \
         (--username with --password-stdin, the Docker config file, or a pull Secret){}",
        said.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
    )]
    Unauthorized {
        /// The reference.
        reference: String,
        /// What the registry said, if it said why.
        said: Option<Refusal>,
    },
    /// The registry refused otherwise.
    #[error("{reference}: the registry refused: {refusal}")]
    Refused {
        /// The reference.
        reference: String,
        /// Its status, error codes and messages.
        refusal: Refusal,
    },
    /// The registry could not be reached (down, wrong address, TLS not trusted).
    #[error("{reference}: the registry cannot be reached: {why}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The transport's error, with its causes (escaped, cut).
        why: String,
    },
    /// The pull did not finish within its deadline (a registry that drips, or the
    /// pulls in flight all busy).
    #[error(
        "{reference}: the pull did not finish within {} (--registry-pull-timeout; pull --timeout)",
        humantime::format_duration(*timeout)
    )]
    TimedOut {
        /// The reference.
        reference: String,
        /// The deadline.
        timeout: Duration,
    },
    /// An answer (a manifest, a token reply, an error body) was larger than its bound.
    #[error("{reference}: the registry's {what} is larger than {bound} bytes; refused unread")]
    AnswerTooLarge {
        /// The reference.
        reference: String,
        /// What was being read.
        what: &'static str,
        /// The bound.
        bound: u64,
    },
    /// A redirect the host does not follow.
    #[error("{reference}: a redirect refused: {why}")]
    Redirect {
        /// The reference.
        reference: String,
        /// Why.
        why: String,
    },
    /// The registry's answer is not what a plugin's pull expects, or a digest did not
    /// match.
    #[error("{reference}: {why}")]
    Registry {
        /// The reference.
        reference: String,
        /// What is wrong.
        why: String,
    },
    /// The manifest does not hold exactly one layer.
    #[error("{reference}: the manifest has {layers} layers; a plugin is one layer")]
    Layers {
        /// The reference.
        reference: String,
        /// How many it has.
        layers: usize,
    },
    /// The layer is not a Wasm component.
    #[error(
        "{reference}: the layer's media type is {media_type}, not a Wasm component's \
         ({WASM_LAYER} or {LEGACY_WASM_LAYER})"
    )]
    MediaType {
        /// The reference.
        reference: String,
        /// The layer's media type (cut).
        media_type: String,
    },
    /// The layer is larger than the bound.
    #[error("{reference}: the component is {size} bytes or more, over the bound of {max_bytes}")]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its declared size, or how much had come when the download stopped.
        size: u64,
        /// The bound.
        max_bytes: u64,
    },
}

/// `text` as an OCI reference (`registry[:port]/repository[:tag][@digest]`).
pub fn reference(text: &str) -> Result<Reference, RegistryError> {
    text.parse().map_err(
        |e: oci_spec::distribution::ParseError| RegistryError::BadReference {
            reference: crate::logs::shorten(text),
            why: e.to_string(),
        },
    )
}
