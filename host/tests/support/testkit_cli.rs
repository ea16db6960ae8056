//! Running `wasm-controller-manager test` as a plugin author does, for the tests of
//! the test kit: the command, the repository's files, fixtures made on the spot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::Result;

/// `wasm-controller-manager test ARGS...`, whatever its outcome.
pub fn test_command<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .arg("test")
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()?)
}

/// A path in the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fixture file in a fresh directory.
pub fn fixture(yaml: &str) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("fixture.yaml");
    std::fs::write(&path, yaml)?;
    Ok((dir, path))
}

/// A ConfigMap the `misbehaving` test plugin acts on as `behaviour` says.
pub fn misbehaving(behaviour: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {behaviour}, namespace: shop, \
         labels: {{wcm.test/misbehave: \"\"}}}}\ndata: {{behaviour: {behaviour}}}\n"
    )
}
