//! `wasm-controller-manager rbac` as a user runs it, for the tests of plugins' RBAC.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{Result, ensure};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use wcm_control_plane::ControlPlane;

/// The example plugins whose RBAC `deploy/rbac.yaml` holds.
pub const EXAMPLES: [&str; 5] = [
    "config-reloader",
    "data-hash",
    "deployment-reconcile",
    "phase-labeller",
    "pod-counter",
];

/// The host's flags for plugins' ServiceAccounts named `<prefix><plugin>` in
/// `namespace`, as `rbac --namespace --service-account-prefix` generated them, then
/// `more`.
pub fn account_flags<'a>(namespace: &'a str, prefix: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--plugin-service-account-namespace",
        namespace,
        "--plugin-service-account-prefix",
        prefix,
    ];
    flags.extend_from_slice(more);
    flags
}

/// `wasm-controller-manager rbac ARGS...`, whatever its outcome.
pub fn rbac<S: AsRef<OsStr>>(args: &[S]) -> Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .arg("rbac")
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()?)
}

/// The YAML `rbac ARGS...` prints, in a file (for `kubectl -f`); fails with its stderr.
pub fn rbac_file<S: AsRef<OsStr>>(args: &[S]) -> Result<tempfile::NamedTempFile> {
    let out = rbac(args)?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &out.stdout)?;
    Ok(file)
}

/// `wasm-controller-manager rbac` for `plugins`, their ServiceAccounts in `namespace`
/// named `<prefix><plugin>`, applied for real; the file, for [`delete_rbac`]. The
/// namespace stays `privileged`: the tests' Pods there meet no profile.
pub fn apply_rbac(
    plane: &ControlPlane,
    namespace: &str,
    prefix: &str,
    plugins: &[PathBuf],
) -> Result<tempfile::NamedTempFile> {
    let mut args: Vec<&OsStr> = [
        "--namespace",
        namespace,
        "--service-account-prefix",
        prefix,
        "--pod-security",
        "privileged",
    ]
    .map(OsStr::new)
    .to_vec();
    args.extend(plugins.iter().map(|p| p.as_os_str()));
    apply_rbac_args(plane, &args)
}

/// `wasm-controller-manager rbac ARGS...` applied as a user applies it
/// (`kubectl apply -f`); the file, for [`delete_rbac`].
pub fn apply_rbac_args<S: AsRef<OsStr>>(
    plane: &ControlPlane,
    args: &[S],
) -> Result<tempfile::NamedTempFile> {
    let file = rbac_file(args)?;
    let apply = ["apply", "-f"].map(OsStr::new);
    super::kubectl(plane, &[&apply[..], &[file.path().as_os_str()]].concat())?;
    Ok(file)
}

/// Deletes the plugins' objects of what [`apply_rbac`] applied, as the docs remove a
/// plugin's RBAC: by the plugin label (the namespace and the host's own objects are
/// shared).
pub fn delete_rbac(plane: &ControlPlane, file: &tempfile::NamedTempFile) {
    let label = wcm_core::rights::PLUGIN_LABEL;
    let delete = [
        "delete",
        "--ignore-not-found",
        "--wait=false",
        "-l",
        label,
        "-f",
    ]
    .map(OsStr::new);
    let _ = super::kubectl(plane, &[&delete[..], &[file.path().as_os_str()]].concat());
}

/// Sets the verbs of the rules on `resource` of the ClusterRole `role`: an
/// operator granting or revoking a right.
pub async fn set_verbs(client: &Client, role: &str, resource: &str, verbs: &[&str]) -> Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut found = roles.get(role).await?;
    for rule in found.rules.iter_mut().flatten() {
        if rule
            .resources
            .as_ref()
            .is_some_and(|r| r.iter().any(|r| r == resource))
        {
            rule.verbs = verbs.iter().map(|v| v.to_string()).collect();
        }
    }
    let patch = serde_json::json!({"rules": found.rules});
    roles
        .patch(role, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
