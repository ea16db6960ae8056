//! `wasm-controller-manager rbac` as a user runs it, for the tests of plugins' RBAC.

use std::ffi::OsStr;
use std::process::{Command, Output};

use anyhow::{Result, ensure};

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
