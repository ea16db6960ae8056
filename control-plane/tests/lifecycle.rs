//! `make cluster-up` twice reuses one control plane; `make cluster-down` twice stops it
//! and leaves nothing behind: no process, and with the node no container shim, network
//! namespace, bridge, mount, cgroup or iptables chain of its own. Runs in a state
//! directory of its own, so it never touches the control plane the other tests share.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_control_plane::{ControlPlane, PAUSE_IMAGE, poll_until, script};

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

/// Pids of every component the state directory records.
fn pids(state: &Path) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(state)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "pid") {
            let text = std::fs::read_to_string(&path).context("pid file")?;
            pids.push(text.trim().parse()?);
        }
    }
    pids.sort();
    Ok(pids)
}

/// Alive means present and not a zombie waiting to be reaped.
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(PathBuf::from(format!("/proc/{pid}/stat")));
    stat.is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// What a node leaves on the machine: network namespaces, links, iptables chains,
/// mounts and processes naming the state directory, cgroups.
fn machine_state(state: &Path) -> Result<BTreeSet<String>> {
    let text = |cmd: &str, args: &[&str]| -> String {
        Command::new(cmd)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let mut seen = BTreeSet::new();
    for netns in text("ip", &["netns", "list"]).lines() {
        seen.insert(format!(
            "netns {}",
            netns.split_whitespace().next().unwrap_or("")
        ));
    }
    for link in std::fs::read_dir("/sys/class/net")? {
        seen.insert(format!("link {}", link?.file_name().to_string_lossy()));
    }
    for chain in text("iptables-save", &[])
        .lines()
        .filter(|l| l.starts_with(':'))
    {
        seen.insert(format!(
            "chain {}",
            chain.split_whitespace().next().unwrap_or("")
        ));
    }
    let dir = state.display().to_string();
    for mount in std::fs::read_to_string("/proc/mounts")?.lines() {
        if mount.contains(&dir) {
            seen.insert(format!("mount {mount}"));
        }
    }
    for proc in std::fs::read_dir("/proc")? {
        let cmdline = std::fs::read(proc?.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&dir) {
            seen.insert(format!("process {cmdline}"));
        }
    }
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup")? {
        for cgroup in std::fs::read_dir(hierarchy?.path()).into_iter().flatten() {
            let name = cgroup?.file_name().to_string_lossy().into_owned();
            if name.starts_with("wcm-") {
                seen.insert(format!("cgroup {name}"));
            }
        }
    }
    Ok(seen)
}

/// Runs a Pod on the state directory's node, if it has one, and waits until it runs.
async fn run_a_pod(state: &Path) -> Result<bool> {
    let plane = ControlPlane::in_state_dir(state);
    if plane.node().is_none() {
        return Ok(false);
    }
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().await?, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "left-behind"},
        "spec": {
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let running = poll_until(Duration::from_secs(90), || async {
        let phase = pods.get("left-behind").await.ok()?.status?.phase;
        (phase.as_deref() == Some("Running")).then_some(true)
    })
    .await;
    running.context("the Pod did not run within 90 s")
}

#[tokio::test]
async fn up_twice_reuses_and_down_twice_leaves_nothing_behind() -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("wcm-lifecycle-{}", std::process::id()));
    let state = tmp.join("cluster");
    let before = machine_state(&state)?;
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
    let ran = run_a_pod(&state).await?;
    let during = machine_state(&state)?;
    if ran {
        ensure!(
            during.iter().any(|s| s.starts_with("netns ")) && during.len() > before.len(),
            "a running Pod left no trace to clean up: {:?}",
            during.difference(&before).collect::<Vec<_>>()
        );
    }

    run("down.sh", &state)?;
    run("down.sh", &state)?;
    let left: Vec<_> = started.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
    assert!(!state.exists(), "state directory not removed");
    let after = machine_state(&state)?;
    let leftovers: Vec<_> = after.difference(&before).collect();
    assert!(leftovers.is_empty(), "cluster-down left {leftovers:?}");
    let _ = std::fs::remove_dir_all(tmp);
    Ok(())
}
