//! The local registry from a test's side: pushing a plugin with the host's `push`, as
//! a user would.

use anyhow::{Context, Result, ensure};
use wcm_control_plane::LocalRegistry;

/// A repository of the calling test's own, so runs never see each other's tags.
pub fn repository(registry: &LocalRegistry, name: &str) -> String {
    format!("{}/tests/{name}-{}", registry.address, fastrand::u32(..))
}

/// Pushes `bytes` as `repo:tag` with `wasm-controller-manager push`; returns the
/// pinned reference (its last line) and the digest.
pub fn push(
    registry: &LocalRegistry,
    repo: &str,
    tag: &str,
    bytes: &[u8],
) -> Result<(String, String)> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("plugin.wasm");
    std::fs::write(&file, bytes)?;
    let reference = format!("{repo}:{tag}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args(["push", file.to_str().context("path")?, &reference])
        .args(["--ca-file", registry.ca_file.to_str().context("path")?])
        .args(["--username", &registry.user, "--password-stdin"])
        .env("DOCKER_CONFIG", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            writeln!(child.stdin.take().expect("stdin"), "{}", registry.password)?;
            child.wait_with_output()
        })?;
    ensure!(
        out.status.success(),
        "push: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = String::from_utf8(out.stdout)?
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let digest = last.rsplit_once('@').context("no digest")?.1.to_string();
    Ok((last, digest))
}

/// The hex SHA-256 of `bytes`: a blob's name in a registry and in the pulled store.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
