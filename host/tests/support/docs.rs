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
