//! Whom a controller under test acts as. Each runs as the ServiceAccount it would be
//! deployed with, so the API server authorises every request of each the same way
//! (RBAC, and impersonation for the host's plugins); the cluster's admin is in
//! `system:masters`, whose requests skip RBAC, which would flatter whichever
//! controller ran as it.

use std::path::{Path, PathBuf};

use anyhow::Result;
use wcm_control_plane::ControlPlane;

/// The namespace the benches have `wasm-controller-manager rbac` put the
/// ServiceAccounts in: their own, apart from a deployed host's `wcm-system`, and
/// deleted after them ([`super::Grants`]).
pub const RBAC_NAMESPACE: &str = "wcm-bench";
/// The host's own ServiceAccount (`wasm-controller-manager rbac`).
pub const HOST_ACCOUNT: &str = "wasm-controller-manager";
/// pod-counter's ServiceAccount: the rights the plugin has, which the native peers,
/// doing the same work, get as theirs.
pub const POD_COUNTER_ACCOUNT: &str = "wcm-plugin-pod-counter";

/// A kubeconfig in `dir` acting as ServiceAccount `name` of [`RBAC_NAMESPACE`].
pub async fn kubeconfig_as(plane: &ControlPlane, name: &str, dir: &Path) -> Result<PathBuf> {
    Ok(plane.kubeconfig_as(RBAC_NAMESPACE, name, dir).await?)
}
