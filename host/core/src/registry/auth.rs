//! How a pull or push authenticates to a registry: the credentials themselves, shared
//! by the Docker config reader (`credentials`), the credential helpers the command
//! line runs (`credential_helper`) and the client, and never shown in a debug line.

/// How a pull or push authenticates to a registry.
#[derive(Clone, PartialEq, Eq)]
pub enum RegistryAuth {
    /// No credentials.
    Anonymous,
    /// A user and password, sent as HTTP Basic (to the registry, or to its token realm).
    Basic(String, String),
    /// A token sent as it is (a Docker config's `identitytoken`).
    Bearer(String),
}

impl RegistryAuth {
    /// A digest of these credentials for `registry`: what the disk store records a
    /// pull under, so a component pulled with some credentials is taken from the disk
    /// for a pull with the same ones only (others ask the registry first). Never the
    /// credentials themselves.
    pub fn fingerprint(&self, registry: &str) -> String {
        let material = match self {
            RegistryAuth::Anonymous => format!("{registry}\0anonymous"),
            RegistryAuth::Basic(user, password) => format!("{registry}\0basic\0{user}\0{password}"),
            RegistryAuth::Bearer(token) => format!("{registry}\0bearer\0{token}"),
        };
        format!("sha256:{}", crate::sha256::hex_of(material.as_bytes()))
    }
}

/// Never the secret: a pull's credentials may show up in a debug line.
impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryAuth::Anonymous => write!(f, "Anonymous"),
            RegistryAuth::Basic(user, _) => write!(f, "Basic({user:?}, <redacted>)"),
            RegistryAuth::Bearer(_) => write!(f, "Bearer(<redacted>)"),
        }
    }
}
