//! Starts or attaches to the project's local kube-apiserver + etcd for tests and demos.
//!
//! Every integration test in the workspace gets its cluster from here: the first call
//! in a test binary runs `scripts/up.sh` (which builds the pinned binaries if needed and
//! reuses a control plane that is already running), later calls reuse the result. Tests
//! never silently skip: if the control plane cannot start, they fail with the reason and
//! the command to run by hand.
//!
//! Each test then takes a [`TestNamespace`]: its own namespace, an admin client, and a
//! label for the cluster-scoped objects it creates, all deleted when it is dropped.

mod account;
mod diagnose;
mod namespace;
mod poll;
mod private;
mod registry;
mod tools;

pub use diagnose::describe_pods;
pub use namespace::TestNamespace;
pub use poll::poll_until;
pub use private::PrivateControlPlane;
pub use registry::LocalRegistry;
pub use tools::{COSIGN_VERSION, HELM_VERSION, HELM3_VERSION, OTELCOL_VERSION, PROMETHEUS_VERSION};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why the local control plane could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `up.sh` failed; the message carries its output and the command to retry by hand.
    #[error("the local control plane did not start: {0}")]
    Start(String),
    /// A kubeconfig written by `up.sh` could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// What went wrong reading or applying it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The TokenRequest API issued no token for the ServiceAccount (`namespace/name`).
    #[error("the TokenRequest of ServiceAccount {0} returned no token")]
    NoToken(String),
    /// A Kubernetes API call made by the helper failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// The pinned Kubernetes version (`scripts/versions.env`).
pub const KUBERNETES_VERSION: &str = "v1.35.4";

/// The local node's name (a control-plane node: labelled and tainted as such).
pub const NODE_NAME: &str = "wcm-control-plane";

/// The image every Pod sandbox of the local node runs, built locally (no registry);
/// a container may run it too (`imagePullPolicy: Never`).
pub const PAUSE_IMAGE: &str = "wcm.local/pause:1";

/// The example web server's image on the local node (`control-plane/images/cmd/web`:
/// serves `$MESSAGE` on `$PORT`, 8080 by default), for Pods that must really serve.
pub const WEB_IMAGE: &str = "wcm.local/web:1";

/// The namespace annotation that gives every Pod of the namespace a toleration of the
/// local node's control-plane taint (the API server's PodTolerationRestriction
/// admission plugin is on), so a controller's Pods can run there.
pub const TOLERATE_CONTROL_PLANE: (&str, &str) = (
    "scheduler.alpha.kubernetes.io/defaultTolerations",
    r#"[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]"#,
);

/// A running local control plane and the two identities it was started with.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    /// Kubeconfig of a `system:masters` client certificate.
    admin_kubeconfig: PathBuf,
    /// Kubeconfig of an authenticated user that RBAC grants nothing.
    restricted_kubeconfig: PathBuf,
}

/// Path of a script shipped next to this crate.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

impl ControlPlane {
    /// Starts the control plane, or attaches to the one running, once per process.
    pub fn shared() -> Result<&'static ControlPlane, Error> {
        static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Start(e.clone()))
    }

    /// Runs `up.sh` and reads the kubeconfig paths from its last line.
    pub fn start() -> Result<ControlPlane, Error> {
        Self::up(None)
    }

    /// Runs `up.sh`, in state directory `state_dir` if given (then without a node:
    /// a private control plane is for disturbing the apiserver, not for running Pods).
    fn up(state_dir: Option<&Path>) -> Result<ControlPlane, Error> {
        let up = script("up.sh");
        let mut command = Command::new("bash");
        command.arg(&up);
        if let Some(dir) = state_dir {
            command.env("WCM_CLUSTER_DIR", dir).env("WCM_NO_NODE", "1");
        }
        let out = command
            .output()
            .map_err(|e| Error::Start(format!("running {}: {e}", up.display())))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        match last.strip_prefix("export KUBECONFIG=") {
            Some(path) if out.status.success() => Ok(Self::at(Path::new(path))),
            _ => Err(Error::Start(format!(
                "{} exited with {}:\n{}{}\nrun `make cluster-up` to see the failure in full",
                up.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr),
                stdout
            ))),
        }
    }

    /// The pinned kubectl, built by `build.sh` into the cache.
    pub fn kubectl() -> PathBuf {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_default();
        cache
            .join("wasm-controller-manager/control-plane")
            .join(format!("kubernetes-{KUBERNETES_VERSION}"))
            .join("kubectl")
    }

    /// The control plane `up.sh` started in `state_dir` (`WCM_CLUSTER_DIR`).
    pub fn in_state_dir(state_dir: &Path) -> ControlPlane {
        Self::at(&state_dir.join("admin.kubeconfig"))
    }

    /// A control plane whose admin kubeconfig is at `admin_kubeconfig`.
    fn at(admin_kubeconfig: &Path) -> ControlPlane {
        let dir = admin_kubeconfig.parent().unwrap_or(Path::new("."));
        ControlPlane {
            admin_kubeconfig: admin_kubeconfig.to_path_buf(),
            restricted_kubeconfig: dir.join("restricted.kubeconfig"),
        }
    }

    /// The name of the local node (kubelet, containerd, kube-scheduler) if this
    /// control plane runs one; `up.sh` says why when it does not.
    pub fn node(&self) -> Option<&'static str> {
        let dir = self.admin_kubeconfig.parent().unwrap_or(Path::new("."));
        dir.join("node.enabled").exists().then_some(NODE_NAME)
    }

    /// Path of the admin kubeconfig, for child processes (`KUBECONFIG=...`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The directory of the control plane's state: certificates, kubeconfigs, data and
    /// each component's log under `logs/`.
    pub fn state_dir(&self) -> &Path {
        self.admin_kubeconfig.parent().unwrap_or(Path::new("."))
    }

    /// The API server's audit log: one JSON line per write (user agent, verb, object,
    /// `requestReceivedTimestamp`, response code); reads are not logged.
    pub fn audit_log(&self) -> PathBuf {
        let dir = self.admin_kubeconfig.parent().unwrap_or(Path::new("."));
        dir.join("audit").join("audit.log")
    }

    /// Path of the restricted user's kubeconfig.
    pub fn restricted_kubeconfig(&self) -> &Path {
        &self.restricted_kubeconfig
    }

    /// A client with full rights (`system:masters`).
    pub async fn admin_client(&self) -> Result<Client, Error> {
        client_from(&self.admin_kubeconfig).await
    }

    /// A client that is authenticated but has no RBAC permissions at all.
    pub async fn restricted_client(&self) -> Result<Client, Error> {
        client_from(&self.restricted_kubeconfig).await
    }
}

/// Builds a client from one kubeconfig file, ignoring `KUBECONFIG` and in-cluster config.
async fn client_from(path: &Path) -> Result<Client, Error> {
    let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| wrap(e.into()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| wrap(e.into()))?;
    Client::try_from(config).map_err(|e| wrap(e.into()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_versions_are_the_ones_the_scripts_pin() {
        let pinned = include_str!("../scripts/versions.env");
        for (key, version) in [
            ("KUBERNETES_VERSION", super::KUBERNETES_VERSION),
            ("COSIGN_VERSION", super::COSIGN_VERSION),
            ("PROMETHEUS_VERSION", super::PROMETHEUS_VERSION),
            ("HELM_VERSION", super::HELM_VERSION),
            ("HELM3_VERSION", super::HELM3_VERSION),
            ("OTELCOL_VERSION", super::OTELCOL_VERSION),
        ] {
            let line = format!("{key}={version}");
            assert!(
                pinned.lines().any(|l| l == line),
                "{line} not in versions.env"
            );
        }
    }
}
