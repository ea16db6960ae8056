//! Plugins compile in a child process of the host's own binary, bounded in memory and
//! time: a plugin over a bound is refused naming the bound, the daemon's memory never
//! holds a compilation, and the other plugins run.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use support::{HostProcess, plugin_bytes, plugins_dir, resources};
use wcm_daemon::status::State;

const WAIT: Duration = Duration::from_secs(120);

/// The pids of the `compile-worker` children of `parent` now running.
fn workers_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let child_of = |pid: &str| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let worker = String::from_utf8_lossy(&cmdline).contains("compile-worker");
        (ppid.parse::<u32>().ok()? == parent && worker).then(|| pid.parse().ok())?
    };
    (entries.flatten())
        .filter_map(|e| child_of(&e.file_name().to_string_lossy()))
        .collect()
}

#[support::test]
async fn a_plugin_over_the_compile_memory_bound_is_refused_and_the_daemon_never_holds_a_compilation()
-> Result<()> {
    // The Python example needs some 370 MiB to compile; pod-counter some 50.
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("phase-labeller.wasm", plugin_bytes("phase-labeller")),
    ])?;
    let flags = ["--no-compile-cache", "--compile-max-memory-mib=200"];
    let mut host = HostProcess::start(dir.path(), &flags)?;
    let refused = host
        .row_in("phase-labeller.wasm", State::Failed, WAIT)
        .await?;
    let reason = refused.reason.unwrap_or_default();
    ensure!(
        reason.contains(
            "compiling needed more memory than the compile worker's bound of 200 MiB \
             (--compile-max-memory-mib)"
        ),
        "{reason}"
    );
    host.wait_for_log(
        &["plugin failed to load", "phase-labeller.wasm", "200 MiB"],
        WAIT,
    )
    .await?;
    host.row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    host.wait_for_log(
        &["plugin loaded", "pod-counter.wasm", "origin=\"compiled\""],
        WAIT,
    )
    .await?;
    ensure!(host.is_running(), "the host died");
    // Compiled in the daemon, the Python example alone took it past 370 MiB.
    let peak = resources(host.pid())?.peak_rss_kib >> 10;
    ensure!(peak < 150, "the daemon's peak resident memory: {peak} MiB");
    Ok(())
}

#[support::test]
async fn a_compilation_past_its_time_bound_is_killed_and_its_plugin_refused() -> Result<()> {
    // The JavaScript example takes several seconds to compile.
    let dir = plugins_dir(&[("data-hash.wasm", plugin_bytes("data-hash"))])?;
    let flags = ["--no-compile-cache", "--compile-timeout=1s"];
    let mut host = HostProcess::start(dir.path(), &flags)?;
    let refused = host.row_in("data-hash.wasm", State::Failed, WAIT).await?;
    let reason = refused.reason.unwrap_or_default();
    ensure!(
        reason.contains(
            "compiling took longer than the compile worker's bound of 1s (--compile-timeout)"
        ),
        "{reason}"
    );
    ensure!(host.is_running(), "the host died");
    let left = workers_of(host.pid());
    ensure!(left.is_empty(), "compile workers left running: {left:?}");
    // The same file, given time, loads: the refusal cost nothing but that attempt.
    drop(host);
    let mut host = HostProcess::start(dir.path(), &["--no-compile-cache"])?;
    let loaded = host.row_in("data-hash.wasm", State::Running, WAIT).await;
    loaded.context("data-hash with the default time bound")?;
    ensure!(host.is_running(), "the host died");
    Ok(())
}

#[support::test]
async fn a_binary_replaced_on_disk_while_the_host_runs_still_compiles_what_it_loads() -> Result<()>
{
    // An upgrade in place renames a new binary over the old one; the running daemon's
    // workers must still be itself, whose compiled code its wasmtime can load.
    let bin = tempfile::tempdir()?;
    let program = bin.path().join("wasm-controller-manager");
    std::fs::copy(env!("CARGO_BIN_EXE_wasm-controller-manager"), &program)?;
    let plane = wcm_control_plane::ControlPlane::shared()?;
    support::grant_test_plugins(plane.admin_kubeconfig())?;
    let dir = plugins_dir(&[])?;
    let mut command = std::process::Command::new(&program);
    command
        .args(["run", "--no-compile-cache", "--no-wasm-plugins"])
        .arg("--plugins-dir")
        .arg(dir.path())
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args([
            "--plugin-service-account-namespace",
            support::TEST_PLUGINS_NAMESPACE,
        ])
        .env("KUBECONFIG", plane.admin_kubeconfig());
    let mut host = HostProcess::launch(command)?;
    host.wait_for_log(&["no plugin is running"], WAIT).await?;
    let replacement = bin.path().join("replacement");
    std::fs::write(&replacement, b"#!/bin/sh\nexit 1\n")?;
    std::fs::rename(&replacement, &program)?;
    std::fs::write(
        dir.path().join("pod-counter.wasm"),
        plugin_bytes("pod-counter"),
    )?;
    host.row_in("pod-counter.wasm", State::Running, WAIT)
        .await?;
    ensure!(host.is_running(), "the host died");
    Ok(())
}

#[support::test]
async fn a_compile_worker_killed_from_outside_is_run_again_and_its_plugin_loads() -> Result<()> {
    // The kernel's OOM killer at the container's limit, say, while other work ran:
    // nothing of the component, so the host compiles it again by itself.
    let dir = plugins_dir(&[("data-hash.wasm", plugin_bytes("data-hash"))])?;
    let mut host = HostProcess::start(dir.path(), &["--no-compile-cache"])?;
    let worker = support::eventually(WAIT, || async { workers_of(host.pid()).into_iter().next() })
        .await
        .context("no compile worker ever ran")?;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &worker.to_string()])
        .status()?;
    ensure!(killed.success(), "kill -KILL {worker}");
    host.wait_for_log(
        &[
            "compile worker ended from outside; compiling again",
            "attempt=1",
        ],
        WAIT,
    )
    .await?;
    host.row_in("data-hash.wasm", State::Running, WAIT).await?;
    ensure!(host.is_running(), "the host died");
    Ok(())
}
