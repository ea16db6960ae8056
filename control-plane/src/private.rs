//! A control plane of one test's own, for scenarios that disturb it (restarting the
//! apiserver) and so must not share the cluster other tests use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{ControlPlane, Error, script};

/// An etcd + kube-apiserver in a state directory of its own, stopped and removed on drop.
#[derive(Debug)]
pub struct PrivateControlPlane {
    state_dir: PathBuf,
    plane: ControlPlane,
}

impl PrivateControlPlane {
    /// Starts a fresh control plane whose state lives in `state_dir` (~7 s).
    pub fn start(state_dir: &Path) -> Result<PrivateControlPlane, Error> {
        let plane = ControlPlane::up(Some(state_dir))?;
        Ok(PrivateControlPlane {
            state_dir: state_dir.to_path_buf(),
            plane,
        })
    }

    /// Stops kube-apiserver and starts it again on the same port, etcd untouched:
    /// every watch breaks, and a watch resumed from an older resource version expires.
    pub fn restart_apiserver(&self) -> Result<(), Error> {
        self.run("restart-apiserver.sh")
    }

    fn run(&self, name: &str) -> Result<(), Error> {
        let path = script(name);
        let out = Command::new("bash")
            .arg(&path)
            .env("WCM_CLUSTER_DIR", &self.state_dir)
            .output()
            .map_err(|e| Error::Start(format!("running {}: {e}", path.display())))?;
        if out.status.success() {
            return Ok(());
        }
        Err(Error::Start(format!(
            "{name} exited with {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

impl std::ops::Deref for PrivateControlPlane {
    type Target = ControlPlane;

    fn deref(&self) -> &ControlPlane {
        &self.plane
    }
}

impl Drop for PrivateControlPlane {
    fn drop(&mut self) {
        if let Err(e) = self.run("down.sh") {
            eprintln!("stopping the private control plane: {e}");
        }
    }
}
