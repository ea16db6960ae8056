//! Controllers written in Python (`plugins/python/phase-labeller`, built with
//! componentize-py), JavaScript (`plugins/javascript/data-hash`, built with
//! componentize-js) and Go (`plugins/go/config-reloader`, built by the standard Go
//! toolchain with `guest-sdk-go` and made a component by the host's `componentize`)
//! run in the host like Rust ones: they register, watch, read the cache, patch
//! labels, apply and record Events through the same WIT imports.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::objects::{events_about, recorded_events};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const PHASE: &str = "example.com/phase";
/// Compiling an 18 MB (CPython inside) or 12 MB (SpiderMonkey inside) component takes
/// ~11-12 s with a debug host.
const CONVERGE: Duration = Duration::from_secs(120);

async fn phase_label(pods: &Api<Pod>, name: &str) -> Option<String> {
    let pod = pods.get(name).await.ok()?;
    pod.metadata.labels?.get(PHASE).cloned()
}

#[support::test]
async fn a_python_controller_labels_pods_with_their_phase_and_records_events() -> Result<()> {
    let ns = TestNamespace::create("python").await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "tracked", "labels": {"example.com/track-phase": ""}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let untracked: Pod = serde_json::from_value(json!({
        "metadata": {"name": "untracked"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    pods.create(&PostParams::default(), &untracked).await?;

    let dir = plugins_dir(&[("phase-labeller.wasm", plugin_bytes("phase-labeller"))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    let labelled = eventually(CONVERGE, || async {
        (phase_label(&pods, "tracked").await? == "Pending").then_some(())
    })
    .await;
    labelled.with_context(|| format!("no phase label; log:\n{}", host.logs().join("\n")))?;
    let events = recorded_events(&ns.client(), ns.name(), "tracked", "PhaseLabelled").await?;
    ensure!(events.len() == 1, "PhaseLabelled Events: {events:?}");
    assert_eq!(
        events[0].reporting_controller.as_deref(),
        Some("phase-labeller")
    );
    assert_eq!(events[0].note.as_deref(), Some("phase Pending"));
    host.wait_for_log(
        &["labelled", "tracked Pending", "plugin=\"phase-labeller\""],
        CONVERGE,
    )
    .await?;

    // A wrong label is corrected; a Pod that did not opt in is left alone.
    let wrong = json!({"metadata": {"labels": {PHASE: "Running"}}});
    pods.patch("tracked", &PatchParams::default(), &Patch::Merge(&wrong))
        .await?;
    let corrected = eventually(CONVERGE, || async {
        (phase_label(&pods, "tracked").await? == "Pending").then_some(())
    })
    .await;
    corrected.context("the wrong label was not corrected")?;
    assert_eq!(phase_label(&pods, "untracked").await, None);
    Ok(())
}

/// 32-bit FNV-1a in 8 hex digits: what data-hash computes, written again here.
fn fnv1a(text: &str) -> String {
    let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

async fn data_hash_label(config_maps: &Api<ConfigMap>, name: &str) -> Option<String> {
    let cm = config_maps.get(name).await.ok()?;
    cm.metadata.labels?.get("example.com/data-hash").cloned()
}

#[support::test]
async fn a_javascript_controller_labels_config_maps_with_a_hash_of_their_data() -> Result<()> {
    let ns = TestNamespace::create("javascript").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings", "labels": {"example.com/hash-data": ""}},
        "data": {"mode": "prod", "colour": "blue"},
    }))?;
    config_maps.create(&PostParams::default(), &cm).await?;
    let dir = plugins_dir(&[("data-hash.wasm", plugin_bytes("data-hash"))])?;
    let host = HostProcess::start(dir.path(), &[])?;

    // The hash is over the data as JSON with sorted keys, as serde_json writes a BTreeMap.
    let expect = |data: &[(&str, &str)]| {
        let sorted: BTreeMap<&str, &str> = data.iter().copied().collect();
        fnv1a(&serde_json::to_string(&sorted).expect("json"))
    };
    let first = expect(&[("mode", "prod"), ("colour", "blue")]);
    let hashed = eventually(CONVERGE, || async {
        (data_hash_label(&config_maps, "settings").await? == first).then_some(())
    })
    .await;
    hashed.with_context(|| format!("no data-hash {first}; log:\n{}", host.logs().join("\n")))?;

    let change = json!({"data": {"mode": "staging"}});
    config_maps
        .patch("settings", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let second = expect(&[("mode", "staging"), ("colour", "blue")]);
    let rehashed = eventually(CONVERGE, || async {
        (data_hash_label(&config_maps, "settings").await? == second).then_some(())
    })
    .await;
    rehashed.context("the hash did not follow the data")?;
    host.wait_for_log(&["hashed", &second, "plugin=\"data-hash\""], CONVERGE)
        .await?;
    Ok(())
}

/// 64-bit FNV-1a of sorted `key=value` entries, each followed by a NUL byte: what
/// config-reloader computes, written again here.
fn config_hash(data: &[(&str, &str)]) -> String {
    let mut entries: Vec<String> = data.iter().map(|(k, v)| format!("{k}={v}")).collect();
    entries.sort();
    let bytes = entries.iter().flat_map(|e| e.bytes().chain([0]));
    let hash = bytes.fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

async fn template_hash(deployments: &Api<Deployment>, name: &str) -> Option<String> {
    let d = deployments.get(name).await.ok()?;
    let template = d.spec?.template.metadata?.annotations?;
    template.get("example.com/config-hash").cloned()
}

#[support::test]
async fn a_go_controller_rolls_a_deployment_when_its_config_map_changes() -> Result<()> {
    let ns = TestNamespace::create("go").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"mode": "prod", "colour": "blue"},
    }))?;
    config_maps.create(&PostParams::default(), &cm).await?;
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"example.com/reload-on": "settings"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
        }},
    }))?;
    deployments.create(&PostParams::default(), &web).await?;
    let dir = plugins_dir(&[("config-reloader.wasm", plugin_bytes("config-reloader"))])?;
    let host = HostProcess::start(dir.path(), &[])?;

    let first = config_hash(&[("mode", "prod"), ("colour", "blue")]);
    let hashed = eventually(CONVERGE, || async {
        (template_hash(&deployments, "web").await? == first).then_some(())
    })
    .await;
    hashed.with_context(|| {
        format!(
            "no config hash {first}; log:
{}",
            host.logs().join("\n")
        )
    })?;
    let change = json!({"data": {"mode": "staging"}});
    config_maps
        .patch("settings", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let second = config_hash(&[("mode", "staging"), ("colour", "blue")]);
    let rolled = eventually(CONVERGE, || async {
        (template_hash(&deployments, "web").await? == second).then_some(())
    })
    .await;
    rolled.context("the Deployment did not follow its ConfigMap")?;
    // A `Reloaded` Event per change: the second joins the first's series (the same
    // reason about the same object), as client-go's recorder groups them.
    let client = ns.client();
    let reloads = eventually(CONVERGE, || async {
        let events = events_about(&client, ns.name(), "web", "Reloaded")
            .await
            .ok()?;
        let count =
            |e: &k8s_openapi::api::events::v1::Event| e.series.as_ref().map_or(1, |s| s.count);
        let total: i32 = events.iter().map(count).sum();
        (total == 2).then_some(events)
    })
    .await;
    let reloads = reloads.context("not one Reloaded Event per change")?;
    let note = reloads[0].note.clone().unwrap_or_default();
    ensure!(note.contains(&first), "{note}");
    Ok(())
}

/// A `Duration`'s `Debug` text as the host logs it (`11.2s`, `14.5ms`, `850µs`, `0ns`).
fn logged_duration(text: &str) -> Result<Duration> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .with_context(|| format!("no unit in {text:?}"))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse()?;
    let seconds = match unit {
        "s" => number,
        "ms" => number / 1e3,
        "µs" => number / 1e6,
        "ns" => number / 1e9,
        _ => anyhow::bail!("unit {unit:?} in {text:?}"),
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// Compiling a large component costs hundreds of MiB, so the Python and JavaScript
/// components (both over 4 MiB) take turns, while pod-counter (under 1 MiB) compiles
/// at once beside them. Loaded together with no compile cache, one of the two large
/// ones waits about as long as the other compiles, and pod-counter does not wait.
#[support::test]
async fn large_plugins_compile_one_at_a_time_and_small_ones_do_not_wait() -> Result<()> {
    let dir = plugins_dir(&[
        ("phase-labeller.wasm", plugin_bytes("phase-labeller")),
        ("data-hash.wasm", plugin_bytes("data-hash")),
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
    ])?;
    let host = HostProcess::start(dir.path(), &["--no-compile-cache"])?;
    let mut steps = BTreeMap::new();
    for file in ["phase-labeller.wasm", "data-hash.wasm", "pod-counter.wasm"] {
        let needles = ["plugin loaded", &format!("file=\"{file}\"")];
        let line = host.wait_for_log(&needles, CONVERGE).await?;
        let field =
            |name| support::field_of(&line, name).with_context(|| format!("no {name}= in {line}"));
        let (wait, compile) = (field("compile_wait")?, field("compile")?);
        steps.insert(file, (logged_duration(&wait)?, logged_duration(&compile)?));
    }
    eprintln!("(compile wait, compile) per plugin: {steps:?}");
    let (python, javascript) = (steps["phase-labeller.wasm"], steps["data-hash.wasm"]);
    // Whichever went second waited for most of the first one's compilation.
    let second_waited = (python.0 >= javascript.1 / 2) || (javascript.0 >= python.1 / 2);
    ensure!(
        second_waited,
        "the large plugins compiled at once: {steps:?}"
    );
    ensure!(
        steps["pod-counter.wasm"].0.is_zero(),
        "pod-counter waited: {steps:?}"
    );
    Ok(())
}

#[support::test]
fn componentize_refuses_a_module_that_is_no_plugin_with_the_reason() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // A core module that exports nothing of the contract.
    let module = dir.path().join("empty.wasm");
    std::fs::write(
        &module,
        wat::parse_str("(module (memory (export \"memory\") 1))")?,
    )?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args(["componentize", "-o"])
        .arg(dir.path().join("out.wasm"))
        .arg(&module)
        .env("RUST_BACKTRACE", "0")
        .output()?;
    let said = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "{said}");
    ensure!(said.contains("empty.wasm"), "{said}");
    ensure!(
        said.contains("not a core module of the contract's world controller"),
        "{said}"
    );
    ensure!(!dir.path().join("out.wasm").exists());
    Ok(())
}
