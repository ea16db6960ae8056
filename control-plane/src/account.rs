//! Kubeconfigs that act as a ServiceAccount: a process outside the cluster (the host
//! under test, a native peer in a bench) is then authorised as it would be in a Pod of
//! that account, by RBAC alone; the admin is in `system:masters`, whose requests skip
//! RBAC and would flatter whoever ran as it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use kube::{Api, Client};

use crate::{ControlPlane, Error};

/// How long a token lasts: longer than any test or bench.
const TOKEN_SECONDS: i64 = 24 * 3600;

impl ControlPlane {
    /// A kubeconfig in `dir` acting as ServiceAccount `namespace/name` (which must
    /// exist): the admin's, with a token of the account (TokenRequest API) for every
    /// user. Named `<name>.kubeconfig`.
    pub async fn kubeconfig_as(
        &self,
        namespace: &str,
        name: &str,
        dir: &Path,
    ) -> Result<PathBuf, Error> {
        let admin = self.admin_client().await?;
        let token = token(&admin, namespace, name).await?;
        let source = self.admin_kubeconfig();
        let wrap =
            |path: &Path, source: Box<dyn std::error::Error + Send + Sync>| Error::Kubeconfig {
                path: path.to_path_buf(),
                source,
            };
        let mut config = Kubeconfig::read_from(source).map_err(|e| wrap(source, e.into()))?;
        for user in &mut config.auth_infos {
            let auth = user.auth_info.get_or_insert_with(Default::default);
            *auth = kube::config::AuthInfo {
                token: Some(token.clone().into()),
                ..Default::default()
            };
        }
        let path = dir.join(format!("{name}.kubeconfig"));
        let text = serde_json::to_string(&config).map_err(|e| wrap(&path, e.into()))?;
        std::fs::write(&path, text).map_err(|e| wrap(&path, e.into()))?;
        Ok(path)
    }
}

/// A token of ServiceAccount `namespace/name`.
async fn token(client: &Client, namespace: &str, name: &str) -> Result<String, Error> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(TOKEN_SECONDS),
            ..Default::default()
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    match issued.status {
        Some(status) if !status.token.is_empty() => Ok(status.token),
        _ => Err(Error::NoToken(format!("{namespace}/{name}"))),
    }
}
