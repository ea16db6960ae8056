//! Hot-loading from the plugins directory: a file dropped in runs, a new version takes
//! over, bad uploads are refused by name while the running version keeps working, a
//! slow copy is loaded once, and a removed plugin stops after its in-flight reconcile.

use crate::support;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use support::builds::another_build;
use support::objects::{
    all_pods, config_map_label, create_config_map, create_node, create_pod, node_label,
    recorded_events, set_config_map_label,
};
use support::{HostProcess, Resources, eventually, plugin_bytes, plugins_dir, resources};
use wcm_control_plane::TestNamespace;

const WAIT: Duration = Duration::from_secs(60);
const COUNT: &str = "pod-counter.example.com/count";
const FAST: &[&str] = &["--file-settle", "200ms"];

/// Writes `bytes` to `dir/name` the way `cp` does: in place.
fn copy_in(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    Ok(std::fs::write(dir.join(name), bytes)?)
}

/// Waits until the Node's count label reads `expected(pods in the cluster)`.
async fn count_label_is(client: &Client, node: &str, expected: fn(usize) -> String) -> Result<()> {
    let found = eventually(WAIT, || async {
        let pods = all_pods(client).await.ok()?.len();
        let label = node_label(client, node, COUNT).await.ok()??;
        (label == expected(pods)).then_some(())
    })
    .await;
    let label = node_label(client, node, COUNT).await?;
    found.with_context(|| format!("count label stuck at {label:?}"))
}

#[support::test]
async fn a_dropped_in_plugin_runs_and_a_new_version_takes_over() -> Result<()> {
    let ns = TestNamespace::create("hot").await?;
    let (client, n) = (ns.client(), ns.name());
    let node = format!("{n}-cp");
    create_node(&client, &node, true, ns.labels()).await?;
    create_pod(&client, n, "first").await?;
    let dir = plugins_dir(&[])?;
    let host = HostProcess::start(dir.path(), FAST)?;
    host.wait_for_log(&["no plugin is running"], WAIT).await?;

    copy_in(dir.path(), "pod-counter.wasm", &plugin_bytes("pod-counter"))?;
    count_label_is(&client, &node, |n| n.to_string()).await?;
    create_pod(&client, n, "second").await?;
    count_label_is(&client, &node, |n| n.to_string()).await?;

    copy_in(
        dir.path(),
        "pod-counter.wasm",
        &plugin_bytes("pod-counter-next"),
    )?;
    host.wait_for_log(
        &[
            "plugin upgraded",
            "version=0.1.0-next",
            "previous=pod-counter 0.1.0",
        ],
        WAIT,
    )
    .await?;
    count_label_is(&client, &node, |n| format!("{n}-pods")).await?;
    create_pod(&client, n, "third").await?;
    count_label_is(&client, &node, |n| format!("{n}-pods")).await?;
    // The count is written before the new Pod's Event: wait for the Event.
    for pod in ["first", "second", "third"] {
        let events = recorded_events(&client, n, pod, "Counted").await?;
        ensure!(events.len() == 1, "{pod}: {} Counted Events", events.len());
        let series = events[0].series.as_ref().map_or(1, |s| s.count);
        ensure!(series == 1, "{pod}: Counted recorded {series} times");
    }
    let table = wcm_daemon::status::fetch(&host.metrics_address().await?).await?;
    let row = table
        .iter()
        .find(|r| r.file == "pod-counter.wasm")
        .context("no row")?;
    assert_eq!(row.version.as_deref(), Some("0.1.0-next"));
    assert_eq!(row.state, wcm_daemon::status::State::Running);
    Ok(())
}

/// A component exporting the reconciler interface of another WIT major version.
fn other_major_component() -> Vec<u8> {
    wat::parse_str(
        r#"(component
            (instance $reconciler)
            (export "wcm:controller/reconciler@1.0.0" (instance $reconciler)))"#,
    )
    .expect("valid component text")
}

#[support::test]
async fn bad_uploads_are_refused_by_name_and_the_running_version_keeps_working() -> Result<()> {
    let ns = TestNamespace::create("badupload").await?;
    let (client, n) = (ns.client(), ns.name());
    let good = plugin_bytes("label-mirror");
    let dir = plugins_dir(&[("mirror.wasm", good.clone())])?;
    let host = HostProcess::start(dir.path(), FAST)?;
    create_config_map(&client, n, "probe", &[("wcm.test/source", "0")]).await?;
    mirrored(&client, n, "0").await?;

    let uploads: [(&str, Vec<u8>, &str); 4] = [
        (
            "garbage",
            b"definitely not wasm".to_vec(),
            "not a WebAssembly file",
        ),
        (
            "truncated",
            good[..good.len() / 2].to_vec(),
            "invalid component",
        ),
        (
            "core module",
            b"\0asm\x01\0\0\0".to_vec(),
            "core WebAssembly module",
        ),
        (
            "other WIT major",
            other_major_component(),
            "does not export the reconciler of a contract version this host serves (wcm:controller@0.3.1 or wcm:controller@0.2.0",
        ),
    ];
    for (round, (what, bytes, reason)) in uploads.iter().enumerate() {
        copy_in(dir.path(), "mirror.wasm", bytes)?;
        let line = host
            .wait_for_log(
                &["plugin upgrade failed", "file=\"mirror.wasm\"", reason],
                WAIT,
            )
            .await
            .with_context(|| format!("{what} was not refused"))?;
        assert!(line.contains("keeps running"), "{line}");
        assert!(
            line.contains("running=mirror 0.1.0") && line.contains("hash="),
            "{line}"
        );
        let value = (round + 1).to_string();
        set_config_map_label(&client, n, "probe", "wcm.test/source", &value).await?;
        mirrored(&client, n, &value)
            .await
            .with_context(|| format!("after {what}"))?;
        // A new file with the same bytes is not running anything: it fails to load.
        copy_in(dir.path(), &format!("new-{round}.wasm"), bytes)?;
        let file = format!("file=\"new-{round}.wasm\"");
        host.wait_for_log(&["plugin failed to load", &file, reason], WAIT)
            .await?;
    }
    let table = wcm_daemon::status::fetch(&host.metrics_address().await?).await?;
    let mirror = table
        .iter()
        .find(|r| r.file == "mirror.wasm")
        .context("no mirror row")?;
    assert_eq!(mirror.state, wcm_daemon::status::State::Running);
    assert!(
        mirror
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("upgrade refused")),
        "{mirror:?}"
    );
    let failed = table
        .iter()
        .filter(|r| r.state == wcm_daemon::status::State::Failed)
        .count();
    assert_eq!(failed, 4, "{table:#?}");
    Ok(())
}

async fn mirrored(client: &Client, ns: &str, value: &str) -> Result<()> {
    let found = eventually(WAIT, || async {
        let label = config_map_label(client, ns, "probe", "wcm.test/mirrored")
            .await
            .ok()??;
        (label == value).then_some(())
    })
    .await;
    found.with_context(|| format!("probe never mirrored {value:?}"))
}

#[support::test]
async fn a_file_copied_in_slowly_is_loaded_once_after_the_last_chunk() -> Result<()> {
    let _ns = TestNamespace::create("slowcopy").await?;
    let dir = plugins_dir(&[])?;
    let host = HostProcess::start(dir.path(), &[])?;
    host.wait_for_log(&["no plugin is running"], WAIT).await?;
    let bytes = plugin_bytes("label-mirror");
    let path = dir.path().join("slow.wasm");
    let mut file = std::fs::File::create(&path)?;
    for chunk in bytes.chunks(4096) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::io::Write::write_all(&mut file, chunk)?;
        std::io::Write::flush(&mut file)?;
    }
    let early = host.lines_with(&["file=\"slow.wasm\""]);
    ensure!(
        early.is_empty(),
        "acted on before the last chunk: {early:#?}"
    );
    drop(file);
    host.wait_for_log(&["plugin loaded", "file=\"slow.wasm\""], WAIT)
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let loads: Vec<String> = (host.lines_with(&["file=\"slow.wasm\""]).into_iter())
        .filter(|l| !l.contains("runs under its file's name"))
        .collect();
    ensure!(
        loads.len() == 1,
        "expected one load and nothing else: {loads:#?}"
    );
    Ok(())
}

#[support::test]
async fn a_plugin_removed_mid_reconcile_finishes_that_call_and_runs_no_more() -> Result<()> {
    let ns = TestNamespace::create("removal").await?;
    let (client, n) = (ns.client(), ns.name());
    let dir = plugins_dir(&[("misbehaving.wasm", plugin_bytes("misbehaving"))])?;
    let host = HostProcess::start(dir.path(), FAST)?;
    host.wait_for_log(&["plugin loaded", "plugin=misbehaving"], WAIT)
        .await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), n);
    let sleeper = |name: &str, behaviour: &str| -> Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"wcm.test/misbehave": ""}},
            "data": {"behaviour": behaviour, "seconds": "3"},
        }))?)
    };
    api.create(&PostParams::default(), &sleeper("sleeper", "sleep")?)
        .await?;
    let started = eventually(WAIT, || async {
        let label = config_map_label(&client, n, "sleeper", "wcm.test/started")
            .await
            .ok()?;
        label.map(|_| ())
    })
    .await;
    started.context("the sleeping reconcile never started")?; // inside its 3 s sleep now
    std::fs::remove_file(dir.path().join("misbehaving.wasm"))?;
    host.wait_for_log(&["plugin removed", "plugin=misbehaving"], WAIT)
        .await?;
    let handled = config_map_label(&client, n, "sleeper", "wcm.test/handled").await?;
    assert_eq!(
        handled.as_deref(),
        Some("true"),
        "the in-flight reconcile was not let finish"
    );

    api.create(&PostParams::default(), &sleeper("after", "ok")?)
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = config_map_label(&client, n, "after", "wcm.test/handled").await?;
    assert_eq!(after, None, "a removed plugin reconciled");
    Ok(())
}

#[support::test]
async fn a_restart_or_a_re_upload_of_the_same_bytes_does_not_compile_again() -> Result<()> {
    let _ns = TestNamespace::create("compilecache").await?;
    let cache = tempfile::tempdir()?;
    let cache_flag = cache.path().to_str().context("utf-8 path")?;
    let flags = ["--file-settle", "200ms", "--compile-cache-dir", cache_flag];
    let dir = plugins_dir(&[("mirror.wasm", plugin_bytes("label-mirror"))])?;
    let host = HostProcess::start(dir.path(), &flags)?;
    host.wait_for_log(&["plugin loaded", "origin=\"compiled\""], WAIT)
        .await?;
    let functions = |dir: &Path| std::fs::read_dir(dir.join("functions")).map(|d| d.count());
    let compiled_functions = functions(cache.path())?;
    copy_in(dir.path(), "again.wasm", &plugin_bytes("label-mirror"))?;
    // A copy under another name runs as a plugin of its own, sharing the code.
    let line = (host.wait_for_log(&["plugin loaded", "file=\"again.wasm\""], WAIT)).await?;
    assert!(line.contains("origin=\"shared\""), "{line}");
    // Another build of it (its own content hash) compiles from the functions stored:
    // most of them (under parallel compilation Cranelift looks some up by a key the
    // first compile did not store: 0-12 % of them in these runs).
    let build = another_build(&plugin_bytes("label-mirror"), "another build");
    copy_in(dir.path(), "build.wasm", &build)?;
    let line = (host.wait_for_log(&["plugin loaded", "file=\"build.wasm\""], WAIT)).await?;
    assert!(line.contains("origin=\"compiled\""), "{line}");
    let added = functions(cache.path())? - compiled_functions;
    ensure!(
        compiled_functions > 100 && added < compiled_functions / 4,
        "{compiled_functions} functions stored by the first compile, {added} more by the second"
    );
    ensure!(host.terminate()?.success(), "the host did not stop cleanly");
    // One file from here on: with both, either could take the code's turn and the
    // other share it (`origin="shared"`), whichever the host started first.
    std::fs::remove_file(dir.path().join("again.wasm"))?;
    std::fs::remove_file(dir.path().join("build.wasm"))?;

    // A corrupted entry is detected and compiled over, never loaded.
    let hash = support::registry::sha256_hex(&plugin_bytes("label-mirror"));
    let entry = std::fs::read_dir(cache.path())?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&hash))
        })
        .context("no cache entry")?;
    let mut bytes = std::fs::read(&entry)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&entry, &bytes)?;
    let host = HostProcess::start(dir.path(), &flags)?;
    host.wait_for_log(&["compile cache entry not used", "corrupted"], WAIT)
        .await?;
    host.wait_for_log(&["plugin loaded", "origin=\"compiled\""], WAIT)
        .await?;
    ensure!(host.terminate()?.success(), "the host did not stop cleanly");

    let host = HostProcess::start(dir.path(), &flags)?;
    host.wait_for_log(&["plugin loaded", "origin=\"cached\""], WAIT)
        .await?;
    ensure!(host.terminate()?.success(), "the host did not stop cleanly");

    // Bounded: past `--compile-cache-max-mib` a new entry pushes out the least
    // recently used, an old wasmtime's first (here 2 MiB of one).
    let foreign = cache
        .path()
        .join(format!("{}-0000000000000000.cwasm", "0".repeat(64)));
    std::fs::write(&foreign, vec![0u8; 2 << 20])?;
    let bounded = [&flags[..], &["--compile-cache-max-mib", "1"]].concat();
    let host = HostProcess::start(dir.path(), &bounded)?;
    host.wait_for_log(&["plugin loaded", "origin=\"cached\""], WAIT)
        .await?;
    ensure!(foreign.exists(), "removed before anything was written");
    copy_in(dir.path(), "other.wasm", &plugin_bytes("watch-options"))?;
    host.wait_for_log(&["compile cache over its bound"], WAIT)
        .await?;
    ensure!(
        !foreign.exists(),
        "another wasmtime's entry outlived the bound"
    );
    Ok(())
}

#[support::test]
async fn a_hundred_upgrade_and_remove_cycles_leave_no_resources_behind() -> Result<()> {
    let _ns = TestNamespace::create("cycles").await?;
    let dir = plugins_dir(&[])?;
    // Instances come from the pooling allocator by default, whose fixed set of slots
    // keeps the pages of slots once used: resident memory then climbs in steps for the
    // first ~100 cycles until the slots in use stop changing. Instances allocated on
    // demand leave only what the host itself keeps, which is what this test is about.
    let flags = ["--file-settle", "50ms", "--no-pooling"];
    let mut host = HostProcess::start(dir.path(), &flags)?;
    host.wait_for_log(&["no plugin is running"], WAIT).await?;
    let versions = [
        plugin_bytes("pod-counter"),
        plugin_bytes("pod-counter-next"),
    ];
    // The first cycles warm the allocator's arenas and caches; the 100 measured cycles
    // start from there, in two halves. A leak grows in both halves; a thread the
    // runtime starts once (a blocking-pool thread when two file reads overlap, with its
    // own malloc arena: ~6 MiB of RSS) shows in one half only, whenever it happens.
    const WARM_UP: usize = 20;
    const HALF: usize = 50;
    let mut samples = Vec::new();
    for round in 1..=WARM_UP + 2 * HALF {
        for (bytes, what) in versions.iter().zip(["plugin loaded", "plugin upgraded"]) {
            copy_in(dir.path(), "cycle.wasm", bytes)?;
            logged(&host, what, round).await?;
        }
        std::fs::remove_file(dir.path().join("cycle.wasm"))?;
        logged(&host, "plugin removed", round).await?;
        if round >= WARM_UP && (round - WARM_UP).is_multiple_of(HALF) {
            samples.push(resources(host.pid())?);
        }
    }
    ensure!(host.is_running(), "the host died");
    let [start, middle, end] = <[_; 3]>::try_from(samples).expect("three samples");
    let within = |a: usize, b: usize| b as f64 <= a as f64 * 1.1 + 1.0;
    ensure!(within(start.fds, end.fds), "fds {start:?} -> {end:?}");
    let grew_in_both = |of: fn(&Resources) -> usize| {
        !within(of(&start), of(&middle)) && !within(of(&middle), of(&end))
    };
    ensure!(
        !grew_in_both(|r| r.threads),
        "threads {start:?} -> {middle:?} -> {end:?}"
    );
    ensure!(
        !grew_in_both(|r| r.rss_kib),
        "memory {start:?} -> {middle:?} -> {end:?}"
    );
    println!("after warm-up {start:?}; 50 cycles later {middle:?}; 100 later {end:?}");
    Ok(())
}

/// Waits until `what` has been logged for `cycle.wasm` `times` times.
async fn logged(host: &HostProcess, what: &str, times: usize) -> Result<()> {
    let done = eventually(WAIT, || async {
        let n = host.lines_with(&[what, "file=\"cycle.wasm\""]).len();
        (n >= times).then_some(())
    })
    .await;
    let errors = host.lines_with(&["ERROR"]);
    done.with_context(|| format!("{what} #{times} never logged; errors: {errors:#?}"))
}

#[support::test]
async fn a_sigterm_while_the_first_plugins_load_stops_the_host_cleanly() -> Result<()> {
    let _ns = TestNamespace::create("earlyterm").await?;
    let dir = plugins_dir(&[("pod-counter.wasm", plugin_bytes("pod-counter"))])?;
    // No compile cache: the first load compiles for about a second.
    let host = HostProcess::start(dir.path(), &["--no-compile-cache"])?;
    host.wait_for_log(&["serving /metrics"], WAIT).await?;
    let early = host.lines_with(&["plugin loaded"]);
    ensure!(
        early.is_empty(),
        "the load finished before the signal: {early:?}"
    );
    let status = host.terminate()?;
    ensure!(
        status.success(),
        "SIGTERM during start-up ended the host with {status}"
    );
    Ok(())
}

#[support::test]
async fn a_slow_plugin_holds_up_neither_the_others_nor_a_sigterm() -> Result<()> {
    let _ns = TestNamespace::create("slowload").await?;
    // The Python plugin (CPython inside, 18 MB) compiles for many seconds without
    // the cache; its file sorts before pod-counter's.
    let dir = plugins_dir(&[
        ("phase-labeller.wasm", plugin_bytes("phase-labeller")),
        ("pod-counter.wasm", plugin_bytes("pod-counter")),
    ])?;
    let host = HostProcess::start(dir.path(), &["--no-compile-cache"])?;
    host.wait_for_log(&["plugin loaded", "plugin=pod-counter"], WAIT)
        .await?;
    let python = host.lines_with(&["plugin loaded", "plugin=phase-labeller"]);
    ensure!(
        python.is_empty(),
        "pod-counter waited for the Python plugin: {python:?}"
    );
    let asked = std::time::Instant::now();
    let status = host.terminate()?;
    let took = asked.elapsed();
    ensure!(
        status.success(),
        "SIGTERM mid-load ended the host with {status}"
    );
    ensure!(
        took < Duration::from_secs(5),
        "the host took {took:?} to stop mid-load"
    );
    Ok(())
}
