//! A `WasmPlugin`'s registry credentials: the `kubernetes.io/dockerconfigjson` Secret
//! its `spec.pullSecret` names, in the host's namespace, read as a Pod's
//! `imagePullSecrets` are.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use wcm_core::registry::{CredentialsError, DockerConfig, RegistryAuth};

/// The Secret type a pull Secret must have.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";

/// Why a pull Secret gave no credentials; each names the Secret.
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    /// It could not be read (missing, or the host may not get it).
    #[error("pull Secret {namespace}/{name}: {cause}")]
    Unreadable {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API server's answer.
        cause: String,
    },
    /// It is not of type `kubernetes.io/dockerconfigjson`, or has no `.dockerconfigjson`.
    #[error("pull Secret {namespace}/{name} {why}")]
    Malformed {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// Its Docker config has no usable entry for the registry.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
}

/// The credentials for `registry` in Secret `namespace/name`.
pub async fn pull_auth(
    client: &Client,
    namespace: &str,
    name: &str,
    registry: &str,
) -> Result<RegistryAuth, PullSecretError> {
    let malformed = |why: String| PullSecretError::Malformed {
        namespace: namespace.to_string(),
        name: wcm_core::logs::shorten(name),
        why,
    };
    if !wcm_core::kube::names::is_dns_subdomain(name) {
        // Checked before it names a URL: no other path can be reached through it.
        return Err(malformed(
            "is not a Secret's name (a DNS-1123 subdomain)".into(),
        ));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get(name)
        .await
        .map_err(|e| PullSecretError::Unreadable {
            namespace: namespace.to_string(),
            name: name.to_string(),
            cause: e.to_string(),
        })?;
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != DOCKER_CONFIG_JSON {
        return Err(malformed(format!(
            "is of type {kind}, not {DOCKER_CONFIG_JSON}"
        )));
    }
    let json = (secret.data.as_ref())
        .and_then(|data| data.get(".dockerconfigjson"))
        .ok_or_else(|| malformed("has no .dockerconfigjson".into()))?;
    let what = format!("pull Secret {namespace}/{name}");
    Ok(DockerConfig::parse(&json.0, &what)?.auth_for(registry, &what)?)
}
