//! A broken or hostile plugin never takes the host down: traps, endless loops and
//! memory bombs fail one reconcile with a clear error and are retried; files that are
//! not components are reported by name; pod-counter keeps working in the same process.

mod support;

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::objects::{all_pods, create_node, create_pod, node_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(60);

/// A core module (not a component): `(module)` in binary form.
const CORE_MODULE: &[u8] = b"\0asm\x01\0\0\0";

async fn misbehave(api: &Api<ConfigMap>, behaviour: &str) -> Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": behaviour, "labels": {"wcm.test/misbehave": ""}},
        "data": {"behaviour": behaviour},
    }))?;
    api.create(&PostParams::default(), &cm).await?;
    Ok(())
}

#[tokio::test]
async fn traps_loops_and_memory_bombs_fail_one_reconcile_each_and_the_host_keeps_serving()
-> Result<()> {
    let ns = TestNamespace::create("hostile").await?;
    let client = ns.client();
    let dir = plugins_dir(&[
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
        ("misbehaving.wasm", plugin_bytes("misbehaving")),
        (
            "random-bytes.wasm",
            (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ),
        ("core-module.wasm", CORE_MODULE.to_vec()),
    ])?;
    let host = HostProcess::start(
        dir.path(),
        &["--reconcile-timeout", "2s", "--max-memory-mib", "32"],
    )?;

    host.wait_for_log(
        &[
            "plugin failed to load",
            "random-bytes.wasm",
            "not a WebAssembly file",
        ],
        WAIT,
    )
    .await?;
    host.wait_for_log(
        &[
            "plugin failed to load",
            "core-module.wasm",
            "core WebAssembly module, not a component",
        ],
        WAIT,
    )
    .await?;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    for behaviour in ["trap", "loop", "grow", "ok"] {
        misbehave(&cms, behaviour).await?;
    }
    let key = |name: &str| format!("v1/ConfigMap {}/{name}", ns.name());
    let failed =
        |name: &str| ["reconcile failed", "plugin=\"misbehaving\"", &key(name)].map(String::from);
    let expect = |name: &str, cause: &str| {
        let mut n = failed(name).to_vec();
        n.push(cause.to_string());
        n
    };
    for needles in [
        expect("trap", "deliberate panic in reconcile of trap"),
        expect("loop", "timed out after 2s"),
        expect("grow", "exceeded its memory limit of 33554432 bytes"),
    ] {
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        host.wait_for_log(&needles, WAIT).await?;
    }

    let handled = eventually(WAIT, || async {
        let cm = cms.get("ok").await.ok()?;
        cm.metadata.labels?.get("wcm.test/handled").cloned()
    })
    .await;
    assert_eq!(
        handled.as_deref(),
        Some("true"),
        "the well-behaved key was not handled"
    );

    // The same process still runs pod-counter.
    let node = format!("{}-cp", ns.name());
    create_node(&client, &node, true, ns.labels()).await?;
    create_pod(&client, ns.name(), "still-counted").await?;
    let counted = eventually(WAIT, || async {
        let pods = all_pods(&client).await.ok()?.len().to_string();
        (node_label(&client, &node, "pod-counter.example.com/count")
            .await
            .ok()??
            == pods)
            .then_some(())
    })
    .await;
    counted.context("pod-counter stopped working next to the hostile plugin")?;

    // Failures are retried with backoff, not dropped.
    let trap_failures = eventually(WAIT, || async {
        let n = host.lines_with(&["reconcile failed", &key("trap")]).len();
        (n >= 3).then_some(n)
    })
    .await;
    assert!(trap_failures.is_some(), "the trapping key was not retried");
    Ok(())
}
