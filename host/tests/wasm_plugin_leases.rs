//! `WasmPlugin`s under `--leader-elect-mode=per-plugin`: every replica pulls (each
//! runs every plugin's informers and may be handed any plugin), the plugin's Lease
//! holder runs it and reports its status, and when the holder goes another replica
//! takes the plugin over from what it pulled itself.

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support::builds::another_build;
use crate::support::election::per_plugin_flags;
use crate::support::registry::{push, repository};
use crate::support::wasm_plugins::{
    WAIT, host_with, is_ready, kept_layer, mirrored, set_spec, setup, source, status_until,
    wasm_plugin,
};
use crate::support::{self, eventually};

#[support::test]
async fn every_replica_pulls_and_the_plugins_holder_runs_it_and_reports() -> Result<()> {
    let (registry, ns) = setup("wasm-per-plugin").await?;
    let repo = repository(&registry, "per-plugin");
    let bytes = another_build(
        &std::fs::read(support::plugin_file("label-mirror"))?,
        "per-plugin",
    );
    let (_, digest) = push(&registry, &repo, "v1", &bytes)?;
    let dir = tempfile::tempdir()?;
    let mut replicas = Vec::new();
    for identity in ["pulls-a", "pulls-b"] {
        let election = per_plugin_flags(ns.name(), identity);
        let election: Vec<&str> = election.iter().map(String::as_str).collect();
        let host = host_with(&ns, &registry, &dir.path().join(identity), &election)?;
        replicas.push((identity, host));
    }

    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let spec = json!({"image": format!("{repo}:v1"), "pullSecret": "pull"});
    api.create(&PostParams::default(), &wasm_plugin("mirror", spec)?)
        .await?;
    let status = status_until(&api, "mirror", "Ready=True", is_ready).await?;
    ensure!(
        status.digest.as_deref() == Some(digest.as_str()),
        "{status:#?}"
    );
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    for (identity, _) in &replicas {
        let kept = kept_layer(&dir.path().join(identity), &bytes);
        let pulled = eventually(WAIT, || async { kept.exists().then_some(()) }).await;
        pulled.with_context(|| format!("{identity} did not pull the plugin"))?;
    }

    // The holder goes: the other replica takes the plugin over and reports it.
    let holder = eventually(WAIT, || async {
        let row = replicas[0].1.row("wasmplugin/mirror").await.ok()??;
        let holder = row.lease?.holder;
        (!holder.is_empty()).then_some(holder)
    })
    .await
    .context("no holder of the plugin")?;
    let at = replicas.iter().position(|(id, _)| *id == holder);
    let (_, gone) = replicas.remove(at.context("the holder is not a replica")?);
    drop(gone);
    let (taker, host) = &replicas[0];
    host.wait_for_log(&["plugin lease acquired", "plugin=mirror"], WAIT)
        .await?;
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;
    // A new spec (settings) is a new generation only the taker can report.
    let settings = json!({"settings": {"mirrored-label": "wcm.test/mirrored"}});
    set_spec(&api, "mirror", settings).await?;
    let reported = |s: &WasmPluginStatus| {
        is_ready(s) && s.digest.as_deref() == Some(&digest) && s.observed_generation == Some(2)
    };
    status_until(&api, "mirror", "generation 2 Ready=True", reported).await?;
    source(&ns, "third", "three").await?;
    mirrored(&ns, "third", "three").await?;
    eprintln!("{holder} held the plugin; {taker} took it over");
    Ok(())
}
