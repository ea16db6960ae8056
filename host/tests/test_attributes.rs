//! Every test of the integration-test binary is declared with `#[support::test]`, which
//! takes its file's turn on the shared control plane before its body runs, or with
//! `#[support::test(offline)]`, which says it touches no cluster. A bare `#[test]` or
//! `#[tokio::test]` would run beside another file's scenarios: it is refused here,
//! naming the file and line.

use crate::support;

use anyhow::{Result, ensure};
use support::docs::repo;

/// The test files of the binary: the modules `tests/integration.rs` declares.
fn test_files() -> Result<Vec<String>> {
    let root = std::fs::read_to_string(repo("host/tests/integration.rs"))?;
    let modules = root
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'));
    Ok(modules
        .filter(|m| *m != "support")
        .map(|m| format!("host/tests/{m}.rs"))
        .collect())
}

#[support::test(offline)]
fn every_test_takes_its_turn_or_says_it_needs_none() -> Result<()> {
    let files = test_files()?;
    ensure!(files.len() > 50, "read too few test files: {files:?}");
    let mut bare = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(repo(&file))?;
        for (at, line) in text.lines().enumerate() {
            let line = line.trim();
            if line == "#[test]" || line.starts_with("#[tokio::test") {
                bare.push(format!("{file}:{}: {line}", at + 1));
            }
        }
    }
    ensure!(
        bare.is_empty(),
        "tests declared without #[support::test] (it takes the file's turn; \
         #[support::test(offline)] for one that touches no cluster):\n{}",
        bare.join("\n")
    );
    Ok(())
}
