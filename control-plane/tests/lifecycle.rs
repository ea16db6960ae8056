//! `make cluster-up` twice reuses one control plane; `make cluster-down` twice stops it
//! and leaves no process behind. Runs in a state directory of its own, so it never
//! touches the control plane the other tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use wcm_control_plane::script;

fn run(script_name: &str, state: &Path) -> Result<Output> {
    let out = Command::new("bash")
        .arg(script(script_name))
        .env("WCM_CLUSTER_DIR", state)
        .output()?;
    ensure!(
        out.status.success(),
        "{script_name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

fn pids(state: &Path) -> Result<Vec<u32>> {
    ["etcd.pid", "kube-apiserver.pid"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(state.join(f)).context(*f)?;
            Ok(text.trim().parse()?)
        })
        .collect()
}

/// Alive means present and not a zombie waiting to be reaped.
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(PathBuf::from(format!("/proc/{pid}/stat")));
    stat.is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn up_twice_reuses_and_down_twice_leaves_no_process() -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("wcm-lifecycle-{}", std::process::id()));
    let state = tmp.join("cluster");
    let first = run("up.sh", &state)?;
    let started = pids(&state)?;
    let second = run("up.sh", &state)?;
    ensure!(
        pids(&state)? == started,
        "second up.sh started new processes"
    );
    let last_line = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .map(str::to_owned)
    };
    let expected = format!("export KUBECONFIG={}/admin.kubeconfig", state.display());
    assert_eq!(last_line(&first).as_deref(), Some(expected.as_str()));
    assert_eq!(last_line(&second).as_deref(), Some(expected.as_str()));
    assert!(String::from_utf8_lossy(&second.stderr).contains("reusing"));
    assert!(started.iter().all(|&p| alive(p)));

    run("down.sh", &state)?;
    run("down.sh", &state)?;
    let left: Vec<_> = started.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
    assert!(!state.exists(), "state directory not removed");
    let _ = std::fs::remove_dir_all(tmp);
    Ok(())
}
