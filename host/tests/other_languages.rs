//! Controllers written in Python (`plugins/python/phase-labeller`, built with
//! componentize-py) and JavaScript (`plugins/javascript/data-hash`, built with
//! componentize-js) run in the host like Rust ones: they register, watch, read the
//! cache, patch labels and record Events through the same WIT imports.

mod support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::objects::recorded_events;
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

#[tokio::test]
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

#[tokio::test]
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
#[tokio::test]
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
