//! Whom a controller under test acts as. Each runs as the ServiceAccount it would be
//! deployed with, so the API server authorises every request of each the same way
//! (RBAC, and impersonation for the host's plugins); the cluster's admin is in
//! `system:masters`, whose requests skip RBAC, which would flatter whichever
//! controller ran as it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use wcm_control_plane::ControlPlane;

/// The namespace `wasm-controller-manager rbac` puts the ServiceAccounts in.
pub const RBAC_NAMESPACE: &str = "wcm-system";
/// The host's own ServiceAccount (`wasm-controller-manager rbac`).
pub const HOST_ACCOUNT: &str = "wasm-controller-manager";
/// pod-counter's ServiceAccount: the rights the plugin has, which the native peers,
/// doing the same work, get as theirs.
pub const POD_COUNTER_ACCOUNT: &str = "wcm-plugin-pod-counter";
/// How long the bench's tokens last: longer than any bench.
const TOKEN_SECONDS: i64 = 24 * 3600;

/// A kubeconfig in `dir` acting as ServiceAccount `name` of [`RBAC_NAMESPACE`]: the
/// admin's, with the account's token for a user.
pub async fn kubeconfig_as(
    client: &Client,
    plane: &ControlPlane,
    name: &str,
    dir: &Path,
) -> Result<PathBuf> {
    let token = token(client, name).await?;
    let admin = std::fs::read_to_string(plane.admin_kubeconfig())?;
    let mut config: serde_json::Value = serde_saphyr::from_str(&admin)?;
    for entry in config["users"].as_array_mut().context("users")? {
        entry["user"] = json!({ "token": token });
    }
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string(&config)?)?;
    Ok(path)
}

/// A token of ServiceAccount `name` from the TokenRequest API.
async fn token(client: &Client, name: &str) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), RBAC_NAMESPACE);
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS},
    }))?;
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("a token of {RBAC_NAMESPACE}/{name}"))?;
    let status = issued.status.context("TokenRequest has no status")?;
    Ok(status.token)
}
