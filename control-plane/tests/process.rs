//! The control-plane scripts' process bookkeeping (`scripts/process.sh`), offline: a
//! component that is still starting is alive, one that died is not, and `stop`
//! leaves nothing running.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, ensure};
use wcm_control_plane::script;

/// Runs `body` in bash with `process.sh` sourced and `STATE_DIR` set to `state`;
/// returns its standard output.
fn with_process_sh(state: &Path, body: &str) -> Result<String> {
    std::fs::create_dir_all(state.join("logs"))?;
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -eu; source \"$1\"; {body}"))
        .arg("bash")
        .arg(script("process.sh"))
        .env("STATE_DIR", state)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{stdout}{stderr}");
    Ok(stdout)
}

/// A daemon that takes a moment between its fork and the exec that puts the state
/// directory on its command line (a busy machine) is alive right after `spawn`.
#[test]
fn a_component_still_starting_is_alive_and_one_that_died_is_not() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let state = dir.path();
    // The directory reaches the command line only at the exec (as the sleeper's name).
    let out = with_process_sh(
        state,
        r#"D="$STATE_DIR" spawn slow bash -c 'sleep 0.3; exec -a "sleeper $D" sleep 30'
           pid_alive slow && echo "slow: alive" || echo "slow: dead"
           spawn quitter bash -c 'exit 3'
           sleep 0.2
           pid_alive quitter && echo "quitter: alive" || echo "quitter: dead"
           stop_component slow
           pid_alive slow && echo "slow: still alive" || echo "slow: stopped""#,
    )?;
    ensure!(out.contains("slow: alive"), "{out}");
    ensure!(out.contains("quitter: dead"), "{out}");
    ensure!(out.contains("slow: stopped"), "{out}");
    Ok(())
}
