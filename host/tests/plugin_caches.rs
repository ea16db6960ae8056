//! Informers follow plugins under `--leader-elect-mode=per-plugin`: two plugins that
//! watch different things (label-mirror: Pods and ConfigMaps labelled
//! `wcm.test/source` everywhere; watch-options: ConfigMaps labelled `wcm.test/step`
//! in one namespace, metadata only) over two replicas, one each. A replica watches
//! and caches only what the plugin it holds watches (`wcm_informer_watching`, and
//! nothing in the other's cache); the replica that takes a killed one's plugin starts
//! that plugin's watches, lists, and acts on what changed meanwhile; a replica that
//! hands a plugin to a newcomer stops the watches no plugin it still holds needs; a
//! plugin removed leaves no `leader_election_master_status` series for its Lease.
//! Code follows the same way: a replica keeps in memory only the compiled code of the
//! plugins it holds (`wcm_plugin_code_bytes`), reads it back from its compile cache
//! when it takes one, and loads it from its source again when the entry is gone.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_control_plane::TestNamespace;

use crate::support::election::{CONVERGE, per_plugin_replica, plugin_holders};
use crate::support::{self, HostProcess, eventually, plugin_bytes};

const MIRROR: &str = "mirror";
const STEPS: &str = "steps";
/// The label `mirror` writes.
const MIRRORED: &str = "wcm.test/caches";

/// The two plugins: label-mirror as `mirror`, watch-options as `steps` watching `ns`.
fn two_plugins(ns: &str) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("mirror.wasm"), plugin_bytes("label-mirror"))?;
    // A label of its own: tests beside this one watch for `wcm.test/mirrored`.
    let own = json!({ "mirrored-label": MIRRORED }).to_string();
    std::fs::write(dir.path().join("mirror.settings.json"), own)?;
    std::fs::write(dir.path().join("steps.wasm"), plugin_bytes("watch-options"))?;
    let settings = json!({ "namespaces": [ns] }).to_string();
    std::fs::write(dir.path().join("steps.settings.json"), settings)?;
    Ok(dir)
}

/// Whether `host` watches (1) or not (0) each plugin's scopes: `mirror`'s Pods and
/// ConfigMaps everywhere, `steps`' ConfigMaps of `ns`.
async fn watching(host: &HostProcess, ns: &str) -> Result<BTreeMap<&'static str, f64>> {
    let metric = "wcm_informer_watching";
    let source = ("selector", "wcm.test/source");
    let pods = host.metric(metric, &[("kind", "v1/Pod"), source]).await?;
    let maps = host
        .metric(metric, &[("kind", "v1/ConfigMap"), source])
        .await?;
    let steps = host
        .metric(metric, &[("kind", "v1/ConfigMap"), ("namespace", ns)])
        .await?;
    Ok(BTreeMap::from([
        ("mirror pods", pods),
        ("mirror maps", maps),
        (STEPS, steps),
    ]))
}

/// What a replica holding `plugins` watches.
fn watches_for(plugins: &[&str]) -> BTreeMap<&'static str, f64> {
    let on = |p: &str| f64::from(u8::from(plugins.contains(&p)));
    let mirror = on(MIRROR);
    BTreeMap::from([
        ("mirror pods", mirror),
        ("mirror maps", mirror),
        (STEPS, on(STEPS)),
    ])
}

/// Waits until `host` watches exactly for `plugins`.
async fn watches_only_for(host: &HostProcess, ns: &str, plugins: &[&str]) -> Result<()> {
    let wanted = watches_for(plugins);
    let seen = eventually(CONVERGE, || async {
        let now = watching(host, ns).await.ok()?;
        (now == wanted).then_some(())
    })
    .await;
    seen.with_context(|| {
        format!("holding {plugins:?}, wanted {wanted:?}; the replica's watches stayed otherwise")
    })
}

/// Waits until the plugins are held one each by `replicas`; returns who holds what.
async fn one_each(ns: &TestNamespace, replicas: [&str; 2]) -> Result<BTreeMap<String, String>> {
    let spread = eventually(CONVERGE, || async {
        let held = plugin_holders(&ns.client(), ns.name()).await.ok()?;
        let by: BTreeMap<String, String> = held.into_iter().map(|(p, (h, _))| (p, h)).collect();
        let mut holders: Vec<&str> = by.values().map(String::as_str).collect();
        holders.sort();
        let mut wanted = replicas.to_vec();
        wanted.sort();
        (by.len() == 2 && holders == wanted).then_some(by)
    })
    .await;
    spread.with_context(|| format!("the two plugins were never held one each by {replicas:?}"))
}

/// A ConfigMap `name` labelled `key=value`.
async fn config_map(ns: &TestNamespace, name: &str, (key, value): (&str, &str)) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let cm = serde_json::from_value(json!({"metadata": {"name": name, "labels": {key: value}}}))?;
    api.create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Waits until ConfigMap `name` carries `key=value`.
async fn labelled(ns: &TestNamespace, name: &str, (key, value): (&str, &str)) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let done = eventually(CONVERGE, || async {
        let labels = api.get(name).await.ok()?.metadata.labels?;
        (labels.get(key).map(String::as_str) == Some(value)).then_some(())
    })
    .await;
    done.with_context(|| format!("{name} never got {key}={value}"))
}

#[support::test]
async fn a_replica_watches_only_for_the_plugins_it_holds_and_a_taker_lists_first() -> Result<()> {
    let ns = TestNamespace::create("plugin-caches").await?;
    let dir = two_plugins(ns.name())?;
    let mut hosts = BTreeMap::new();
    for identity in ["caches-a", "caches-b"] {
        let host = per_plugin_replica(&ns, dir.path(), identity)?;
        hosts.insert(identity.to_string(), host);
    }
    let by = one_each(&ns, ["caches-a", "caches-b"]).await?;
    for (plugin, holder) in &by {
        watches_only_for(&hosts[holder], ns.name(), &[plugin.as_str()]).await?;
    }
    config_map(&ns, "source", ("wcm.test/source", "one")).await?;
    config_map(&ns, "step", ("wcm.test/step", "1")).await?;
    labelled(&ns, "source", (MIRRORED, "one")).await?;
    labelled(&ns, "step", ("wcm.test/seen", "true")).await?;
    // The replica holding `mirror` caches none of `steps`' ConfigMaps, and the other
    // way round.
    let steps_objects = [("kind", "v1/ConfigMap"), ("namespace", ns.name())];
    let mirror_host = &hosts[&by[MIRROR]];
    let held_elsewhere = mirror_host
        .metric("wcm_informer_objects", &steps_objects)
        .await?;
    ensure!(
        held_elsewhere == 0.0,
        "the mirror's replica caches {held_elsewhere} of steps'"
    );

    // SIGKILL the replica holding `steps`; a ConfigMap made meanwhile is seen by the
    // taker, whose watch of it starts with the take-over.
    let dead = by[STEPS].clone();
    let survivor = by[MIRROR].clone();
    hosts.get_mut(&dead).context("dead")?.kill()?;
    config_map(&ns, "step-2", ("wcm.test/step", "2")).await?;
    watches_only_for(&hosts[&survivor], ns.name(), &[MIRROR, STEPS]).await?;
    labelled(&ns, "step-2", ("wcm.test/seen", "true")).await?;
    let taker = &hosts[&survivor];
    let acquired = taker.last_logged_at(&["plugin lease acquired", "plugin=steps"])?;
    let listed = taker.last_logged_at(&["informer synced", "kind=v1/ConfigMap", ns.name()])?;
    let list = listed.duration_since(acquired);
    eprintln!("the taker's list of the plugin's ConfigMaps ended {list:#} after it acquired it");
    ensure!(list.is_positive(), "listed before it acquired the plugin");

    // A newcomer takes one plugin from the survivor, which stops the watches of the
    // plugin it gave away (unless it still holds one that shares them).
    let newcomer = per_plugin_replica(&ns, dir.path(), "caches-c")?;
    let after = one_each(&ns, [survivor.as_str(), "caches-c"]).await?;
    let kept: Vec<&str> = (after.iter())
        .filter(|(_, h)| **h == survivor)
        .map(|(p, _)| p.as_str())
        .collect();
    let given: Vec<&str> = (after.iter())
        .filter(|(_, h)| *h == "caches-c")
        .map(|(p, _)| p.as_str())
        .collect();
    watches_only_for(&hosts[&survivor], ns.name(), &kept).await?;
    watches_only_for(&newcomer, ns.name(), &given).await?;
    config_map(&ns, "step-3", ("wcm.test/step", "3")).await?;
    config_map(&ns, "source-3", ("wcm.test/source", "three")).await?;
    labelled(&ns, "step-3", ("wcm.test/seen", "true")).await?;
    labelled(&ns, "source-3", (MIRRORED, "three")).await?;

    // `steps` removed: no replica takes part in its Lease any more, so none exports a
    // standing 0 for it (which `max by (name)` would read as a Lease nobody holds,
    // and alert); `mirror`'s Lease is still reported by its holder.
    std::fs::remove_file(dir.path().join("steps.wasm"))?;
    for host in [&hosts[&survivor], &newcomer] {
        let gone = eventually(CONVERGE, || async {
            let text = host.metrics().await.ok()?;
            let statuses: Vec<&str> = (text.lines())
                .filter(|l| l.starts_with("leader_election_master_status{"))
                .collect();
            let steps = statuses.iter().any(|l| l.contains("-steps\""));
            let mirror = statuses.iter().any(|l| l.contains("-mirror\""));
            (!steps && mirror).then_some(())
        })
        .await;
        ensure!(
            gone.is_some(),
            "a replica still reports the removed plugin's Lease:\n{}",
            host.metrics().await?
        );
    }
    Ok(())
}

/// Bytes of `plugin`'s compiled code `host` keeps in memory.
async fn code_bytes(host: &HostProcess, plugin: &str) -> Result<f64> {
    host.metric("wcm_plugin_code_bytes", &[("plugin", plugin)])
        .await
}

/// Waits until `host` keeps the code of exactly `held` of the two plugins in memory.
async fn code_only_for(host: &HostProcess, held: &[&str]) -> Result<()> {
    let last = std::sync::Mutex::new(Vec::new());
    let kept = eventually(CONVERGE, || async {
        let mut kept = Vec::new();
        for plugin in [MIRROR, STEPS] {
            kept.push((plugin, code_bytes(host, plugin).await.ok()?));
        }
        let resident: Vec<&str> = (kept.iter())
            .filter(|(_, b)| *b > 0.0)
            .map(|(p, _)| *p)
            .collect();
        let done = resident == held;
        *last.lock().expect("not poisoned") = kept;
        done.then_some(())
    })
    .await;
    kept.with_context(|| {
        let seen = last.lock().expect("not poisoned").clone();
        format!(
            "the replica never kept the code of exactly {held:?} (code bytes: {seen:?}); log:\n{}",
            host.logs().join("\n")
        )
    })
}

#[support::test]
async fn a_replica_keeps_only_the_code_of_the_plugins_it_holds_and_reads_it_back_on_taking_one()
-> Result<()> {
    let ns = TestNamespace::create("plugin-code").await?;
    let dir = two_plugins(ns.name())?;
    // `code-a` compiles into a cache of its own, from which the test removes an entry.
    let cache = tempfile::tempdir()?;
    let own_cache = format!("--compile-cache-dir={}", cache.path().display());
    let flags = crate::support::election::per_plugin_flags(ns.name(), "code-a");
    let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    flags.push(&own_cache);
    let mut a = HostProcess::start(dir.path(), &flags)?;
    let mut b = per_plugin_replica(&ns, dir.path(), "code-b")?;
    let by = one_each(&ns, ["code-a", "code-b"]).await?;
    let held_by = |who: &str| -> Vec<&str> {
        [MIRROR, STEPS]
            .into_iter()
            .filter(|p| by[*p] == who)
            .collect()
    };
    code_only_for(&a, &held_by("code-a")).await?;
    code_only_for(&b, &held_by("code-b")).await?;

    // `code-b` crashes after the entry of its plugin's code went from `code-a`'s
    // cache: `code-a` takes the plugin, cannot read its code back, loads it again
    // from the file (compiling it anew), and serves it.
    let taken = held_by("code-b")[0];
    let component = plugin_bytes(if taken == MIRROR {
        "label-mirror"
    } else {
        "watch-options"
    });
    let hash = wcm_core::runtime::artifacts::content_hash(&component);
    let mut removed = 0;
    for entry in std::fs::read_dir(cache.path())?.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&hash) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    ensure!(
        removed == 1,
        "{removed} cache entries of {taken} in {}",
        cache.path().display()
    );
    b.kill()?;
    a.wait_for_log(
        &["no longer in the compile cache", &format!("plugin={taken}")],
        CONVERGE,
    )
    .await?;
    a.wait_for_log(&["plugin upgraded", &format!("plugin={taken}")], CONVERGE)
        .await?;
    config_map(&ns, "step-lost", ("wcm.test/step", "lost")).await?;
    config_map(&ns, "source-lost", ("wcm.test/source", "lost")).await?;
    labelled(&ns, "step-lost", ("wcm.test/seen", "true")).await?;
    labelled(&ns, "source-lost", (MIRRORED, "lost")).await?;
    code_only_for(&a, &[MIRROR, STEPS]).await?;

    // A newcomer takes one plugin: `code-a` parks the code it gave away. Then
    // `code-a` is drained: the newcomer reads the other plugin's code back from the
    // compile cache and serves it.
    let c = per_plugin_replica(&ns, dir.path(), "code-c")?;
    let after = one_each(&ns, ["code-a", "code-c"]).await?;
    let kept_by_a: Vec<&str> = [MIRROR, STEPS]
        .into_iter()
        .filter(|p| after[*p] == "code-a")
        .collect();
    code_only_for(&a, &kept_by_a).await?;
    let given: Vec<&str> = [MIRROR, STEPS]
        .into_iter()
        .filter(|p| after[*p] == "code-c")
        .collect();
    code_only_for(&c, &given).await?;
    a.stop()?;
    let read_back = c
        .log_field(
            &["code read back", &format!("plugin={}", kept_by_a[0])],
            "took",
            CONVERGE,
        )
        .await?;
    eprintln!("the taker read {}'s code back in {read_back}", kept_by_a[0]);
    code_only_for(&c, &[MIRROR, STEPS]).await?;
    config_map(&ns, "step-back", ("wcm.test/step", "back")).await?;
    config_map(&ns, "source-back", ("wcm.test/source", "back")).await?;
    labelled(&ns, "step-back", ("wcm.test/seen", "true")).await?;
    labelled(&ns, "source-back", (MIRRORED, "back")).await?;
    Ok(())
}
