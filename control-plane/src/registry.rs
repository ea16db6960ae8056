//! The local registry `up.sh` starts beside the control plane (CNCF Distribution, TLS
//! by the cluster's CA, basic auth), as `registry.env` in the state directory names it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{ControlPlane, Error};

/// Where the local registry listens and how to log in to it.
#[derive(Debug, Clone)]
pub struct LocalRegistry {
    /// `127.0.0.1:PORT`: its address from this machine.
    pub address: String,
    /// `GATEWAY:PORT`: its address from the local node's Pods.
    pub from_pods: String,
    /// The CA that signed its serving certificate.
    pub ca_file: PathBuf,
    /// The user of its htpasswd file.
    pub user: String,
    /// That user's password.
    pub password: String,
    /// Where it stores blobs (filesystem driver), for tests that play a registry
    /// whose storage went bad.
    pub storage: PathBuf,
}

impl ControlPlane {
    /// The registry started with this control plane.
    pub fn registry(&self) -> Result<LocalRegistry, Error> {
        LocalRegistry::read(self.state_dir())
    }
}

impl LocalRegistry {
    /// The file holding blob `digest` (`sha256:<hex>`) in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        let prefix = &hex[..hex.len().min(2)];
        (self.storage.join("docker/registry/v2/blobs/sha256"))
            .join(prefix)
            .join(hex)
            .join("data")
    }

    /// The registry of the state directory `state`: its `registry.env` (`KEY=value`
    /// lines) and its storage.
    fn read(state: &Path) -> Result<LocalRegistry, Error> {
        let path = &state.join("registry.env");
        let unreadable = |why: String| Error::Start(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
        let values: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let value = |key: &str| {
            (values.get(key).map(|v| v.to_string())).ok_or_else(|| unreadable(format!("no {key}")))
        };
        Ok(LocalRegistry {
            address: value("WCM_REGISTRY")?,
            from_pods: value("WCM_REGISTRY_FROM_PODS")?,
            ca_file: PathBuf::from(value("WCM_REGISTRY_CA")?),
            user: value("WCM_REGISTRY_USER")?,
            password: value("WCM_REGISTRY_PASSWORD")?,
            storage: state.join("registry").join("data"),
        })
    }
}
