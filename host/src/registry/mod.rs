//! Plugins in OCI registries: the CNCF Wasm layout they are pushed in, the credentials
//! a registry asks for, a client that pushes and pulls them within bounds, and the
//! on-disk store of what was pulled, by digest. Used by `push` and `pull` on the
//! command line and for `WasmPlugin`s.

mod cache;
mod client;
mod credentials;
mod layout;
mod signature;

pub use cache::{DEFAULT_MAX_BYTES as DEFAULT_PULLED_MAX_BYTES, Fetched, PulledPlugins};
pub use client::{Pulled, Registry};
pub use credentials::{CredentialsError, DockerConfig};
pub use layout::{ACCEPTED_LAYERS, LEGACY_WASM_LAYER, NotAComponent, WASM_CONFIG, WASM_LAYER};
pub use oci_client::Reference;
pub use oci_client::secrets::RegistryAuth;
pub use signature::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING, SignatureError, TrustedKey, verify};

use std::path::PathBuf;

/// Why a push or pull failed; each names the reference and the cause.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A CA file given for the registry could not be read.
    #[error("cannot read the CA file {path}: {why}")]
    CaFile {
        /// The file.
        path: PathBuf,
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
        /// The text given.
        reference: String,
        /// The parser's complaint.
        why: String,
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
         (--username with --password-stdin, the Docker config file, or a pull Secret)"
    )]
    Unauthorized {
        /// The reference.
        reference: String,
    },
    /// The registry could not be reached (down, wrong address, TLS not trusted).
    #[error("{reference}: the registry cannot be reached: {why}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The transport's error, with its causes.
        why: String,
    },
    /// The registry refused or failed, or a digest did not match.
    #[error("{reference}: {why}")]
    Registry {
        /// The reference.
        reference: String,
        /// The registry's or the client's error.
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
        /// The layer's media type.
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
    text.parse()
        .map_err(|e: oci_client::ParseError| RegistryError::BadReference {
            reference: text.to_string(),
            why: e.to_string(),
        })
}

impl RegistryError {
    /// An error of `oci-client` about `reference`.
    fn of(reference: &Reference, e: oci_client::errors::OciDistributionError) -> RegistryError {
        use oci_client::errors::OciDistributionError as E;
        let reference = reference.to_string();
        match e {
            E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => {
                RegistryError::Unauthorized { reference }
            }
            E::ServerError {
                code: 401 | 403, ..
            } => RegistryError::Unauthorized { reference },
            E::ImageManifestNotFoundError(_) | E::ServerError { code: 404, .. } => {
                RegistryError::NotFound { reference }
            }
            E::RegistryError { envelope, .. } if envelope.errors.iter().any(unknown) => {
                RegistryError::NotFound { reference }
            }
            E::RequestError(e) => RegistryError::Unreachable {
                reference,
                why: causes(&e),
            },
            e => RegistryError::Registry {
                reference,
                why: e.to_string(),
            },
        }
    }
}

/// Whether the registry says the manifest, repository or blob is unknown.
fn unknown(error: &oci_client::errors::OciError) -> bool {
    use oci_client::errors::OciErrorCode as C;
    matches!(
        error.code,
        C::ManifestUnknown | C::NameUnknown | C::BlobUnknown
    )
}

/// An error and its causes on one line: a transport error's own text is only
/// "error sending request"; the cause says connection refused or certificate unknown.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
