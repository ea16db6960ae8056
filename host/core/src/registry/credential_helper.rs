//! Docker credential helpers, run as docker, oras and crane run them: the program
//! `docker-credential-<name>` on `PATH`, given the registry's server on standard input
//! to `get`, answering `{"ServerURL", "Username", "Secret"}` (a `Username` of
//! `<token>` makes `Secret` an identity token). `docker login` on most desktops and the
//! cloud CLIs (`gcloud`, `aws ecr`, `az acr`) leave credentials there instead of in
//! the config file.
//!
//! Only for the command line's own user (`push`, `pull`, `rbac`): the program is the
//! user's choice in the user's file. A pull Secret names a helper too, but the daemon
//! never runs a program a Secret names (whoever writes Secrets would run code in the
//! host); that is refused, naming the Secret. A helper's answer is bounded (64 KiB,
//! 30 s) like any other input.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde::Deserialize;

use super::auth::RegistryAuth;

/// Longest a helper may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from a helper.
const MAX_ANSWER_BYTES: u64 = 64 << 10;

/// Why a helper gave no credentials (its program, and why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the credential helper docker-credential-{helper}: {why}")]
pub struct HelperError {
    /// The helper's name (`osxkeychain`, `gcloud`, `ecr-login`).
    pub helper: String,
    /// What went wrong.
    pub why: String,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// The server name helpers keep `registry` under: Docker Hub's is its v1 URL, as
/// `docker login` stores it; any other registry its host.
pub fn server_of(registry: &str) -> String {
    match registry {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => {
            "https://index.docker.io/v1/".to_string()
        }
        other => other.to_string(),
    }
}

/// The credentials helper `helper` keeps for `registry`; anonymous when it has none.
pub fn get(helper: &str, registry: &str) -> Result<RegistryAuth, HelperError> {
    let failed = |why: String| HelperError {
        helper: helper.to_string(),
        why: crate::logs::escape_cut(&why, 300).0,
    };
    if !helper
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(failed("not a helper's name".into()));
    }
    let mut child = Command::new(format!("docker-credential-{helper}"))
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("cannot be run: {e} (is it on PATH?)")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(server_of(registry).as_bytes());
    }
    let stdout = child.stdout.take();
    let child = Arc::new(Mutex::new(child));
    let watchdog = watch(child.clone());
    let mut out = Vec::new();
    if let Some(stdout) = stdout {
        let _ = stdout.take(MAX_ANSWER_BYTES + 1).read_to_end(&mut out);
    }
    // Polled, the lock let go between looks, so the watchdog can always kill it.
    let status = loop {
        match lock(&child).try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(failed(e.to_string())),
        }
    };
    drop(watchdog);
    let text = String::from_utf8_lossy(&out);
    if !status.success() {
        // As docker: no credentials for this server is no error, just none.
        if text.contains("credentials not found") {
            return Ok(RegistryAuth::Anonymous);
        }
        return Err(failed(format!("failed ({status}): {}", text.trim())));
    }
    if out.len() as u64 > MAX_ANSWER_BYTES {
        return Err(failed(format!(
            "answered more than {MAX_ANSWER_BYTES} bytes"
        )));
    }
    let answer: Answer = serde_json::from_slice(&out)
        .map_err(|e| failed(format!("answered something other than credentials: {e}")))?;
    Ok(match (answer.username.as_str(), answer.secret) {
        (_, secret) if secret.is_empty() => RegistryAuth::Anonymous,
        ("<token>", token) => RegistryAuth::Bearer(token),
        (user, password) => RegistryAuth::Basic(user.to_string(), password),
    })
}

/// Kills `child` if it still runs after [`TIMEOUT`], unless the result is dropped
/// first (its answer read, it has ended).
fn watch(child: Arc<Mutex<Child>>) -> mpsc::Sender<()> {
    let (done, finished) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(TIMEOUT) {
            let _ = lock(&child).kill();
        }
    });
    done
}

fn lock(child: &Mutex<Child>) -> std::sync::MutexGuard<'_, Child> {
    child.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_is_kept_under_its_v1_url_and_others_under_their_host() {
        assert_eq!(server_of("index.docker.io"), "https://index.docker.io/v1/");
        assert_eq!(server_of("r.example:5000"), "r.example:5000");
    }

    #[test]
    fn a_helper_that_is_not_there_or_not_a_name_is_said_so() {
        let missing = get("wcm-no-such-helper", "r.example").expect_err("missing");
        assert!(
            missing
                .to_string()
                .contains("docker-credential-wcm-no-such-helper"),
            "{missing}"
        );
        let path = get("../../bin/sh", "r.example").expect_err("a path");
        assert!(path.to_string().contains("not a helper's name"), "{path}");
    }
}
