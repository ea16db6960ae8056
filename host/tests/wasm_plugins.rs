//! `WasmPlugin`s on the real control plane with the local registry (TLS, basic auth):
//! a host with an empty plugins directory follows the resources of its namespace.
//! A plugin pushed and declared runs (it labels a ConfigMap), its status `Ready=True`
//! with the digest pushed; a new version pushed and named takes over; one that fails
//! to register is `Loaded=False` saying why while the running one runs on and status
//! keeps its digest; a registry that cannot be reached is `Pulled=False` with the
//! cause, nothing else disturbed; a plugin file of the same identity is refused;
//! paused and deleted, the plugin stops. The host's process is never restarted.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wcm_control_plane::{ControlPlane, LocalRegistry, TestNamespace};
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support::builds::another_build;
use crate::support::registry::{push, repository};
use crate::support::wasm_plugins::{
    WAIT, condition, has, host, host_with, is_ready, kept_layer, mirrored, mirrored_to,
    pull_refused, set_spec, setup, source, status_until, wasm_plugin,
};
use crate::support::{self, eventually};

#[support::test]
async fn a_wasm_plugin_is_pulled_run_upgraded_refused_paused_and_deleted() -> Result<()> {
    let (registry, ns) = setup("wasm-plugins").await?;
    let repo = repository(&registry, "label-mirror");
    let v1_bytes = std::fs::read(support::plugin_file("label-mirror"))?;
    let (v1, v1_digest) = push(&registry, &repo, "v1", &v1_bytes)?;
    let dir = tempfile::tempdir()?;
    let host = host(&ns, &registry, dir.path())?;

    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let plugin: WasmPlugin = wasm_plugin(
        "mirror",
        json!({"image": format!("{repo}:v1"), "pullSecret": "pull"}),
    )?;
    let applied = Instant::now();
    api.create(&PostParams::default(), &plugin).await?;
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    eprintln!(
        "apply → first reconcile (label-mirror, cold): {:?}",
        applied.elapsed()
    );
    let status = status_until(&api, "mirror", "Ready=True", is_ready).await?;
    ensure!(
        status.digest.as_deref() == Some(v1_digest.as_str()),
        "{status:#?}"
    );
    ensure!(status.image.as_deref() == Some(v1.as_str()), "{status:#?}");
    ensure!(status.state.as_deref() == Some("running"), "{status:#?}");
    ensure!(status.observed_generation == Some(1), "{status:#?}");

    // A new build under a new tag takes over.
    let (_, v2_digest) = push(&registry, &repo, "v2", &another_build(&v1_bytes, "v2"))?;
    set_spec(&api, "mirror", json!({"image": format!("{repo}:v2")})).await?;
    let upgraded = |s: &WasmPluginStatus| s.digest.as_deref() == Some(v2_digest.as_str());
    status_until(&api, "mirror", "the v2 digest", upgraded).await?;
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;

    // A version that does not register is refused; v2 runs on.
    let refused = std::fs::read(support::plugin_file("hostile-too-many-watches"))?;
    push(&registry, &repo, "v3", &refused)?;
    set_spec(&api, "mirror", json!({"image": format!("{repo}:v3")})).await?;
    let not_loaded = |s: &WasmPluginStatus| has(s, "Loaded", "False", "UpgradeRefused");
    let status = status_until(&api, "mirror", "the refused upgrade", not_loaded).await?;
    ensure!(
        status.digest.as_deref() == Some(v2_digest.as_str()),
        "{status:#?}"
    );
    source(&ns, "third", "three").await?;
    mirrored(&ns, "third", "three").await?;

    // A digest the registry does not have: said, and v2 runs on.
    let absent = format!("{repo}@sha256:{}", "0".repeat(64));
    set_spec(&api, "mirror", json!({ "image": absent })).await?;
    let not_found = |s: &WasmPluginStatus| has(s, "Pulled", "False", "NotFound");
    let status = status_until(&api, "mirror", "Pulled=False NotFound", not_found).await?;
    ensure!(
        status.digest.as_deref() == Some(v2_digest.as_str()),
        "{status:#?}"
    );

    // A registry that cannot be reached: said, and v2 runs on.
    set_spec(
        &api,
        "mirror",
        json!({"image": "127.0.0.1:1/nowhere/plugin:v1"}),
    )
    .await?;
    let unreachable = |s: &WasmPluginStatus| has(s, "Pulled", "False", "RegistryUnreachable");
    let status = status_until(&api, "mirror", "Pulled=False", unreachable).await?;
    ensure!(
        status.digest.as_deref() == Some(v2_digest.as_str()),
        "{status:#?}"
    );

    // A plugin file of the same identity is refused while the resource holds it.
    let plugins = dir.path().join("plugins");
    std::fs::write(plugins.join("mirror.wasm"), &v1_bytes)?;
    let row = eventually(WAIT, || async {
        host.row("mirror.wasm").await.ok().flatten()
    })
    .await;
    let row = row.context("no row for mirror.wasm")?;
    ensure!(
        row.reason.as_deref() == Some("the identity mirror is taken by the WasmPlugin mirror"),
        "{row:?}"
    );
    std::fs::remove_file(plugins.join("mirror.wasm"))?;

    // Paused, then deleted: the plugin stops, its row goes.
    set_spec(
        &api,
        "mirror",
        json!({"image": format!("{repo}:v2"), "paused": true}),
    )
    .await?;
    let paused = |s: &WasmPluginStatus| s.state.as_deref() == Some("paused");
    status_until(&api, "mirror", "paused", paused).await?;
    let gone = eventually(WAIT, || async {
        host.row("wasmplugin/mirror")
            .await
            .ok()
            .and_then(|r| r.is_none().then_some(()))
    })
    .await;
    gone.context("the paused plugin still runs")?;
    api.delete("mirror", &Default::default()).await?;
    let logged = host
        .wait_for_log(&["WasmPlugin deleted", "mirror"], WAIT)
        .await;
    logged.context("the deletion was not seen")?;
    Ok(())
}

/// The label the backlog test's v2 writes: its own, so that copies of label-mirror in
/// tests running beside it (which write `wcm.test/mirrored` on every labelled
/// ConfigMap of the cluster) cannot make v1 look as if it had written.
const BACKLOG_LABEL: &str = "wcm.test/backlog";

/// Whether ConfigMap `name` carries `BACKLOG_LABEL=value` now.
async fn is_mirrored(ns: &TestNamespace, name: &str, value: &str) -> bool {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let labels = api.get(name).await.ok().and_then(|cm| cm.metadata.labels);
    labels.is_some_and(|l| l.get(BACKLOG_LABEL).map(String::as_str) == Some(value))
}

#[support::test]
async fn an_upgrade_in_the_middle_of_a_backlog_loses_no_key() -> Result<()> {
    let (registry, ns) = setup("wasm-backlog").await?;
    let repo = repository(&registry, "backlog");
    let v1_bytes = std::fs::read(support::plugin_file("label-mirror"))?;
    push(&registry, &repo, "v1", &v1_bytes)?;
    let (_, v2_digest) = push(&registry, &repo, "v2", &another_build(&v1_bytes, "v2"))?;
    let dir = tempfile::tempdir()?;
    let host = host_with(&ns, &registry, dir.path(), &[])?;
    // v1 is told to write a label no object may carry: every key fails and waits in
    // the queue, retried with backoff, until a version that can write takes over.
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let spec = json!({"image": format!("{repo}:v1"), "pullSecret": "pull",
                      "settings": {"mirrored-label": "wcm.test/not a label"}});
    api.create(&PostParams::default(), &wasm_plugin("mirror", spec)?)
        .await?;
    status_until(&api, "mirror", "Ready=True", is_ready).await?;

    let names: Vec<String> = (0..20).map(|i| format!("backlog-{i}")).collect();
    for name in &names {
        source(&ns, name, "one").await?;
    }
    for name in &names {
        let failed = host.wait_for_log(&["reconcile failed", name], WAIT).await;
        failed.with_context(|| format!("{name} was never tried by v1"))?;
    }
    let mut waiting = 0;
    for name in &names {
        waiting += usize::from(!is_mirrored(&ns, name, "one").await);
    }
    ensure!(waiting == names.len(), "v1 mirrored what it could not");
    let v2 = json!({"image": format!("{repo}:v2"), "settings": {"mirrored-label": BACKLOG_LABEL}});
    set_spec(&api, "mirror", v2).await?;
    let upgraded = |s: &WasmPluginStatus| s.digest.as_deref() == Some(v2_digest.as_str());
    status_until(&api, "mirror", "the v2 digest", upgraded).await?;
    // Every key that waited is reconciled by v2.
    for name in &names {
        mirrored_to(&ns, name, BACKLOG_LABEL, "one").await?;
    }
    Ok(())
}

#[support::test]
async fn rbac_of_a_wasm_plugin_is_that_of_its_component_under_the_resources_name() -> Result<()> {
    let registry = ControlPlane::shared()?.registry()?;
    let repo = repository(&registry, "label-mirror");
    let bytes = std::fs::read(support::plugin_file("label-mirror"))?;
    push(&registry, &repo, "v1", &bytes)?;
    let dir = tempfile::tempdir()?;
    // The same component as a file named as the resource: its RBAC is the reference.
    let file = dir.path().join("mirror.wasm");
    std::fs::write(&file, &bytes)?;
    let yaml = dir.path().join("mirror.yaml");
    std::fs::write(
        &yaml,
        format!(
            "apiVersion: wasm-controller-manager.io/v1alpha1\nkind: WasmPlugin\n\
             metadata: {{name: mirror}}\nspec: {{image: \"{repo}:v1\", pullSecret: pull}}\n"
        ),
    )?;
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", registry.user, registry.password));
    let config = json!({"auths": {(&registry.address): {"auth": auth}}});
    std::fs::write(dir.path().join("config.json"), config.to_string())?;
    let rbac = |path: &Path| -> Result<std::process::Output> {
        let ca = registry.ca_file.to_str().context("path")?;
        Ok(
            std::process::Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
                .args(["rbac", path.to_str().context("path")?, "--ca-file", ca])
                .env("DOCKER_CONFIG", dir.path())
                .output()?,
        )
    };
    let from_file = rbac(&file)?;
    let from_resource = rbac(&yaml)?;
    ensure!(
        from_resource.status.success(),
        "{}",
        String::from_utf8_lossy(&from_resource.stderr)
    );
    let text = String::from_utf8(from_resource.stdout)?;
    ensure!(text.contains("name: wcm-plugin-mirror"), "{text}");
    ensure!(
        text == String::from_utf8(from_file.stdout)?,
        "the resource's RBAC differs from its component's"
    );

    // Without credentials the registry refuses, and the error names the resource.
    std::fs::remove_file(dir.path().join("config.json"))?;
    let refused = rbac(&yaml)?;
    let said = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        !refused.status.success()
            && said.contains("WasmPlugin mirror:")
            && said.contains("not authorized"),
        "{said}"
    );
    Ok(())
}

/// A cosign key pair made by cosign in `dir` (no password): the public key's PEM.
fn cosign_key_pair(dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    let out = std::process::Command::new(ControlPlane::cosign())
        .arg("generate-key-pair")
        .env("COSIGN_PASSWORD", "")
        .current_dir(dir)
        .output()?;
    ensure!(
        out.status.success(),
        "cosign: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(std::fs::read_to_string(dir.join("cosign.pub"))?)
}

/// Signs `pinned` (`repo@sha256:...`) with the key in `dir`, as `cosign sign --key`
/// does without a transparency log.
fn cosign_sign(registry: &LocalRegistry, dir: &Path, pinned: &str) -> Result<()> {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", registry.user, registry.password));
    let config = json!({"auths": {(&registry.address): {"auth": auth}}});
    std::fs::write(dir.join("config.json"), config.to_string())?;
    let out = std::process::Command::new(ControlPlane::cosign())
        .args([
            "sign",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "-y",
            pinned,
        ])
        .env("COSIGN_PASSWORD", "")
        .env("DOCKER_CONFIG", dir)
        .env("SSL_CERT_FILE", &registry.ca_file)
        .current_dir(dir)
        .output()?;
    ensure!(
        out.status.success(),
        "cosign sign: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[support::test]
async fn a_signature_policy_admits_only_what_its_key_signed_before_compiling() -> Result<()> {
    let (registry, ns) = setup("wasm-signed").await?;
    let dir = tempfile::tempdir()?;
    let (a, b) = (dir.path().join("key-a"), dir.path().join("key-b"));
    let (key_a, key_b) = (cosign_key_pair(&a)?, cosign_key_pair(&b)?);
    let repo = repository(&registry, "signed");
    let plugin = std::fs::read(support::plugin_file("label-mirror"))?;
    let (signed, _) = push(
        &registry,
        &repo,
        "signed",
        &another_build(&plugin, "signed"),
    )?;
    cosign_sign(&registry, &a, &signed.replace(":signed@", "@"))?;
    let unsigned_bytes = another_build(&plugin, "unsigned");
    push(&registry, &repo, "unsigned", &unsigned_bytes)?;
    let host = host(&ns, &registry, &dir.path().join("host"))?;

    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let declare = |name: &str, tag: &str, key: &str| -> Result<WasmPlugin> {
        let spec = json!({"image": format!("{repo}:{tag}"), "pullSecret": "pull",
                          "verify": {"publicKey": key}});
        wasm_plugin(name, spec)
    };
    for (name, tag, key) in [
        ("signed", "signed", &key_a),
        ("unsigned", "unsigned", &key_a),
        ("wrong", "signed", &key_b),
    ] {
        api.create(&PostParams::default(), &declare(name, tag, key)?)
            .await?;
    }
    status_until(&api, "signed", "Ready=True", is_ready).await?;
    let missing = status_until(
        &api,
        "unsigned",
        "SignatureMissing",
        pull_refused("SignatureMissing"),
    )
    .await?;
    let message = condition(&missing, "Pulled")
        .map(|c| c.2)
        .unwrap_or_default();
    ensure!(
        message.contains("is not signed by key sha256:") && message.contains("no signature"),
        "{message}"
    );
    ensure!(
        condition(&missing, "Loaded").is_some_and(|c| c.1 == "NotPulled"),
        "{missing:#?}"
    );
    // `kubectl describe wasmplugin unsigned` shows it too: a Warning Event about the
    // resource (by uid), naming the key.
    let uid = api.get("unsigned").await?.metadata.uid.context("no uid")?;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(ns.client(), ns.name());
    let failed = eventually(WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            let about = e.regarding.as_ref();
            e.reason.as_deref() == Some("PluginFailed")
                && about.is_some_and(|r| r.kind.as_deref() == Some("WasmPlugin"))
                && about.and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
        })
    })
    .await
    .context("no PluginFailed Event about the WasmPlugin unsigned")?;
    let note = failed.note.unwrap_or_default();
    ensure!(
        failed.type_.as_deref() == Some("Warning") && note.contains("is not signed by key sha256:"),
        "{note}"
    );
    let wrong = status_until(
        &api,
        "wrong",
        "SignatureInvalid",
        pull_refused("SignatureInvalid"),
    )
    .await?;
    let message = condition(&wrong, "Pulled").map(|c| c.2).unwrap_or_default();
    ensure!(message.contains("a signature by another key"), "{message}");
    // Refused before anything was pulled: no unsigned component on the host's disk.
    let kept = kept_layer(&dir.path().join("host"), &unsigned_bytes);
    ensure!(!kept.exists(), "the unsigned plugin was pulled");
    drop(host);

    // A host-wide key (`--verify-key`) applies to a WasmPlugin that names none.
    let anything: WasmPlugin = wasm_plugin(
        "anything",
        json!({"image": format!("{repo}:unsigned"), "pullSecret": "pull"}),
    )?;
    api.create(&PostParams::default(), &anything).await?;
    let host_key = a.join("cosign.pub");
    let flags = ["--verify-key", host_key.to_str().context("path")?];
    let _host = host_with(&ns, &registry, &dir.path().join("host-policy"), &flags)?;
    status_until(
        &api,
        "anything",
        "SignatureMissing",
        pull_refused("SignatureMissing"),
    )
    .await?;
    Ok(())
}

#[support::test]
async fn a_standby_pulls_ahead_and_serves_within_a_lease_duration_of_a_crashed_leader() -> Result<()>
{
    use crate::support::election::{LEASE, SHORT};
    let (registry, ns) = setup("wasm-leader").await?;
    let repo = repository(&registry, "leader");
    let bytes = another_build(
        &std::fs::read(support::plugin_file("label-mirror"))?,
        "leader",
    );
    push(&registry, &repo, "v1", &bytes)?;
    let dir = tempfile::tempdir()?;
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    let election = crate::support::election::flags(SHORT, ns.name());
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let mut a = host_with(&ns, &registry, &dir_a, &election)?;
    a.wait_for_log(&["became leader"], WAIT).await?;
    let b = host_with(&ns, &registry, &dir_b, &election)?;
    b.wait_for_log(&["lease holder changed"], WAIT).await?;

    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let plugin: WasmPlugin = wasm_plugin(
        "mirror",
        json!({"image": format!("{repo}:v1"), "pullSecret": "pull"}),
    )?;
    api.create(&PostParams::default(), &plugin).await?;
    status_until(&api, "mirror", "Ready=True", is_ready).await?;
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    // The standby pulled and loaded it too (reads only): warm for a take-over.
    let loaded = eventually(WAIT, || async {
        let row = b.row("wasmplugin/mirror").await.ok()??;
        (row.state == wcm_daemon::status::State::Running).then_some(())
    })
    .await;
    ensure!(
        loaded.is_some(),
        "the standby did not load the WasmPlugin ahead"
    );
    ensure!(
        kept_layer(&dir_b, &bytes).exists(),
        "the standby did not pull ahead"
    );

    // The leader crashes: the standby leads and serves within a lease duration (plus
    // a reconcile), not at its next pull retry.
    a.kill()?;
    let killed = Instant::now();
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;
    let served = killed.elapsed();
    eprintln!("a crashed leader's WasmPlugin served by the standby {served:?} after the kill");
    let bound = LEASE + std::time::Duration::from_secs(2) + crate::support::election::SLACK * 10;
    ensure!(
        served <= bound,
        "served {served:?} after the kill, more than a lease duration and 2 s ({bound:?})"
    );
    Ok(())
}
