//! The commands the docs show, taken from their Markdown as a reader copies them.

use std::path::{Path, PathBuf};

/// The blocks of `markdown` whose info string is `info` (```` ```sh guide ````), in
/// order: the steps a test runs literally.
pub fn blocks(markdown: &str, info: &str) -> Vec<String> {
    let opening = format!("```{info}");
    let mut steps = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, text) if text == opening => current = Some(String::new()),
            (Some(block), "```") => {
                steps.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    steps
}

/// The `sh guide` blocks of the repository's file `doc`.
pub fn guide_steps(doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    blocks(&text, "sh guide")
}

/// A path in the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// `PATH` with the host binary's directory first, as after installing it.
pub fn path_with_host() -> String {
    let host = Path::new(env!("CARGO_BIN_EXE_wasm-controller-manager"));
    let dir = host.parent().unwrap_or(Path::new("."));
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs the ```` ```sh INFO ```` blocks of the repository's file `doc` in order, as one
/// script in `dir`, with `env` over the test's environment (a reader's shell: tools on
/// `PATH`, `KUBECONFIG`, what earlier prose told them to set); what it printed, or an
/// error with everything it said.
pub fn follow(doc: &str, info: &str, dir: &Path, env: &[(&str, String)]) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(repo(doc))?;
    let steps = blocks(&text, info);
    anyhow::ensure!(!steps.is_empty(), "{doc}: no `{info}` block");
    let out = std::process::Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{}", steps.concat())])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .output()?;
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "{doc}'s `{info}` blocks, followed literally, failed:\n{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(printed)
}

/// A directory that is a checkout to a reader's commands — `charts/`, `scripts/`,
/// `control-plane/` and `target/` are the repository's — where the files they write land
/// apart from the repository.
pub fn checkout_view() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for entry in ["charts", "scripts", "control-plane", "target", "Cargo.toml"] {
        std::os::unix::fs::symlink(repo(entry), dir.path().join(entry))?;
    }
    Ok(dir)
}
