//! What a hostile or broken registry sends is read within bounds: `pull` from a
//! registry (`support::hostile_registry`) that streams an endless manifest, drips a
//! byte a second, redirects elsewhere or without end, answers with megabytes of error
//! page, or names a token realm over http or one that never stops answering, fails
//! on each within its bound, in seconds, naming the cause, and never repeats what the
//! registry wrote in its body. A host following `WasmPlugin`s that name such a
//! registry keeps its memory, runs the valid `WasmPlugin` beside them, and says on
//! each refused one why, with the bounded text only; one naming a registry the
//! operator did not allow is refused naming the flag.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support::hostile_registry::{HostileRegistry, SECRET};
use crate::support::wasm_plugins::{
    condition, host_with, is_ready, mirrored, pull_refused, push_label_mirror, setup, source,
    status_until, wasm_plugin,
};
use crate::support::{self, resources};

/// What one `pull` did.
struct Pulled {
    ok: bool,
    stderr: String,
    took: Duration,
    /// The highest resident memory seen while it ran, in KiB.
    peak_kib: usize,
}

/// `pull REFERENCE` from the hostile registry (plain http), watching its memory.
fn pull(reference: &str, behaviour: &str, extra: &[&str], out: &Path) -> Result<Pulled> {
    let out = out.join(format!("{behaviour}.wasm"));
    let began = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args([
            "pull",
            reference,
            "-o",
            out.to_str().context("path")?,
            "--plain-http",
        ])
        .args(extra)
        .env("DOCKER_CONFIG", out.parent().context("dir")?)
        // An error's backtrace would be resolved (tens of MiB of line tables) and
        // printed: neither is the pull's.
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut peak_kib = 0;
    while child.try_wait()?.is_none() {
        if let Ok(now) = resources(child.id()) {
            peak_kib = peak_kib.max(now.peak_rss_kib);
        }
        ensure!(
            began.elapsed() < Duration::from_secs(60),
            "pull {behaviour} never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    Ok(Pulled {
        ok: output.status.success(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        took: began.elapsed(),
        peak_kib,
    })
}

#[support::test]
async fn a_pull_from_a_hostile_registry_stops_at_each_bound_and_repeats_nothing() -> Result<()> {
    let registry = HostileRegistry::start().await?;
    let dir = tempfile::tempdir()?;
    let cases: [(&str, &[&str], &str); 8] = [
        (
            "endless",
            &[],
            "the registry's manifest is larger than 4393216 bytes; refused unread",
        ),
        (
            "drip",
            &["--timeout", "3s"],
            "the pull did not finish within 3s",
        ),
        ("elsewhere", &[], "a redirect refused: http to 127.0.0.2"),
        ("loop", &[], "a redirect refused: more than 10 redirects"),
        ("bigerror", &[], "the registry refused: HTTP 500"),
        ("denied", &[], "not authorized"),
        (
            "httprealm",
            &[],
            "the registry's token realm is refused: http to 127.0.0.2",
        ),
        (
            "endlesstoken",
            &[],
            "the registry's token reply is larger than 65536 bytes",
        ),
    ];
    // Beside them, a plugin served over plain http, as the operator named it, comes.
    let served = tokio::task::spawn_blocking({
        let reference = registry.reference("plugin");
        let dir = dir.path().to_path_buf();
        move || pull(&reference, "plugin", &[], &dir)
    });
    let served = served.await??;
    ensure!(served.ok, "a plugin over plain http: {}", served.stderr);
    let pulled = std::fs::read(dir.path().join("plugin.wasm"))?;
    ensure!(
        pulled == support::plugin_bytes("label-mirror"),
        "other bytes came"
    );
    for (behaviour, extra, expected) in cases {
        let reference = registry.reference(behaviour);
        let dir = dir.path().to_path_buf();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let pulled = tokio::task::spawn_blocking(move || {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            pull(&reference, behaviour, &extra, &dir)
        });
        let pulled = pulled.await??;
        eprintln!(
            "pull {behaviour}: {:?}, peak {} MiB: {}",
            pulled.took,
            pulled.peak_kib >> 10,
            pulled.stderr.trim()
        );
        ensure!(!pulled.ok, "{behaviour}: the pull succeeded");
        ensure!(
            pulled.stderr.contains(expected),
            "{behaviour}: {}",
            pulled.stderr
        );
        ensure!(
            !pulled.stderr.contains(SECRET),
            "{behaviour} repeated the body: {}",
            pulled.stderr
        );
        ensure!(
            pulled.stderr.lines().count() <= 3,
            "{behaviour}: {}",
            pulled.stderr
        );
        ensure!(
            pulled.stderr.len() < 2048,
            "{behaviour}: {} bytes of error",
            pulled.stderr.len()
        );
        ensure!(
            pulled.peak_kib < 150 << 10,
            "{behaviour}: peak {} KiB",
            pulled.peak_kib
        );
    }
    Ok(())
}

#[support::test]
async fn a_wasm_plugin_naming_a_hostile_registry_costs_only_itself() -> Result<()> {
    let (registry, ns) = setup("wasm-hostile").await?;
    let hostile = HostileRegistry::start().await?;
    let repo = push_label_mirror(&registry)?;
    let dir = tempfile::tempdir()?;
    let allowed = format!("{},{}", registry.address, hostile.address);
    let flags = [
        "--plain-http-registry",
        &hostile.address,
        "--allowed-registries",
        &allowed,
    ];
    let host = host_with(&ns, &registry, dir.path(), &flags)?;
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let plugins = [
        ("served", hostile.reference("plugin")),
        ("endless", hostile.reference("endless")),
        ("bigerror", hostile.reference("bigerror")),
        ("denied", hostile.reference("denied")),
        ("elsewhere", "r.example.invalid/plugins/x:v1".to_string()),
    ];
    for (name, image) in &plugins {
        let plugin = wasm_plugin(name, json!({ "image": image }))?;
        api.create(&PostParams::default(), &plugin).await?;
    }
    let valid = wasm_plugin(
        "mirror",
        json!({"image": format!("{repo}:v1"), "pullSecret": "pull"}),
    )?;
    api.create(&PostParams::default(), &valid).await?;

    status_until(&api, "mirror", "Ready=True", is_ready).await?;
    status_until(&api, "served", "Ready=True over plain http", is_ready).await?;
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    let endless = status_until(
        &api,
        "endless",
        "too large",
        pull_refused("RegistryAnswerTooLarge"),
    )
    .await?;
    let big = status_until(&api, "bigerror", "refused", pull_refused("PullFailed")).await?;
    let denied = status_until(&api, "denied", "denied", pull_refused("Unauthorized")).await?;
    let elsewhere = status_until(
        &api,
        "elsewhere",
        "not allowed",
        pull_refused("RegistryNotAllowed"),
    )
    .await?;
    let message = |s: &WasmPluginStatus| condition(s, "Pulled").map(|c| c.2).unwrap_or_default();
    ensure!(
        message(&endless).contains("manifest is larger than"),
        "{endless:#?}"
    );
    ensure!(
        message(&big).ends_with("the registry refused: HTTP 500"),
        "{big:#?}"
    );
    let said = message(&denied);
    ensure!(said.contains("DENIED: denied\\nforged line xxx"), "{said}");
    ensure!(said.len() < 1024 && !said.contains(SECRET), "{said}");
    ensure!(
        message(&elsewhere).contains("is not among --allowed-registries"),
        "{elsewhere:#?}"
    );
    for line in host.logs() {
        ensure!(
            !line.contains(SECRET),
            "the log repeated a registry's body: {line}"
        );
    }
    // Each failed pull is tried again with a growing pause; the endless manifest has
    // been read (and cut) several times by now.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let peak = resources(host.pid())?.peak_rss_kib;
    eprintln!(
        "host peak resident memory with hostile registries: {} MiB",
        peak >> 10
    );
    ensure!(
        peak < 400 << 10,
        "the host's memory grew to {} MiB",
        peak >> 10
    );
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;
    Ok(())
}
