//! `run --record-plugin NAME=DIR` and `test PLUGIN.wasm --replay DIR`, on the real
//! control plane: deployment-reconcile applies a WebApp backed by a Secret while the
//! host records it; each reconcile's transcript holds the calls with the answers the
//! API server gave (the Secret's data and annotations redacted: `kubectl apply` keeps
//! its whole content in one), and replaying the transcripts
//! offline with the same plugin goes exactly as it went. A transcript whose recorded
//! answer is changed (the Secret at another version) fails the replay, naming the
//! first call that differs; a transcript with a call the plugin no longer makes is
//! warned about.

use crate::support;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::testkit_cli::{test_command, text};
use support::webapp::{create_webapp, deployment_where, install_crd};
use support::{HostProcess, plugin_bytes, plugin_file, plugins_dir};
use wcm_control_plane::TestNamespace;

const PLUGIN: &str = "deployment-reconcile";
const TOKEN: &str = "s3cr3t-token-for-the-record";

/// The transcripts in `dir`, by file, parsed.
fn transcripts(dir: &Path) -> Result<Vec<(PathBuf, Value)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut parsed = Vec::new();
    for file in files {
        let value: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file)?)?;
        parsed.push((file, value));
    }
    Ok(parsed)
}

/// `test deployment-reconcile.wasm --settings SETTINGS --replay DIR`.
fn replay(settings: &Path, dir: &Path) -> Result<(bool, String, String)> {
    let args = [
        plugin_file(PLUGIN),
        "--settings".into(),
        settings.to_path_buf(),
        "--replay".into(),
        dir.to_path_buf(),
    ];
    let out = test_command(&args)?;
    Ok((out.status.success(), text(&out.stdout), text(&out.stderr)))
}

#[support::test]
async fn a_recorded_plugin_replays_offline_as_it_ran_its_secrets_redacted() -> Result<()> {
    let ns = TestNamespace::create("record").await?;
    let registry = TestNamespace::create("record-registry").await?;
    install_crd(&ns.client()).await?;
    let secrets: Api<Secret> = Api::namespaced(ns.client(), ns.name());
    // As `kubectl apply` leaves it: the whole Secret again in an annotation.
    let applied = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
        "stringData": {"TOKEN": TOKEN}});
    let last = "kubectl.kubernetes.io/last-applied-configuration";
    let secret = json!({"metadata": {"name": "vault-token",
        "annotations": {(last): applied.to_string()}}, "stringData": {"TOKEN": TOKEN}});
    let secret = secrets
        .create(&PostParams::default(), &serde_json::from_value(secret)?)
        .await?;
    let version = secret
        .metadata
        .resource_version
        .context("no resourceVersion")?;
    let spec = json!({"image": "vault-ui:2", "secretName": "vault-token"});
    create_webapp(&ns, "vault", spec).await?;

    let settings = format!(
        "registryNamespace: {}\nsecretRecheckSeconds: 1\n",
        registry.name()
    );
    let dir = plugins_dir(&[
        ("deployment-reconcile.wasm", plugin_bytes(PLUGIN)),
        ("deployment-reconcile.settings.yaml", settings.into_bytes()),
    ])?;
    let recorded = tempfile::tempdir()?;
    let flag = format!("{PLUGIN}={}", recorded.path().display());
    let mut host = HostProcess::start(dir.path(), &["--record-plugin", &flag])?;
    let annotation = "demo.wasm-controller-manager.io/secret-version";
    deployment_where(&ns, "vault", "applied with the Secret's version", |d| {
        let template = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
        let annotations = template.and_then(|m| m.annotations.as_ref());
        annotations.and_then(|a| a.get(annotation)) == Some(&version)
    })
    .await?;
    host.stop()?;

    // The reconcile that applied it: the Secret read live, its data redacted, and
    // the Deployment applied with the version the API server answered.
    let taped = transcripts(recorded.path())?;
    let vault = taped.iter().find(|(_, t)| {
        t["key"]["namespace"] == ns.name()
            && t["key"]["name"] == "vault"
            && calls(t).any(|c| c["call"] == "apply" && c["args"]["object"]["kind"] == "Deployment")
    });
    let (vault_file, vault) = vault.context("no transcript applies vault's Deployment")?;
    let read =
        calls(vault).find(|c| c["call"] == "get" && c["args"]["object"]["kind"] == "v1/Secret");
    let read = read.context("the Secret was not read")?;
    ensure!(
        read["answer"]["ok"]["data"]["TOKEN"] == "PHJlZGFjdGVkPg==", // `<redacted>` in base64, as data values are
        "{read:#}"
    );
    let apply =
        calls(vault).find(|c| c["call"] == "apply" && c["args"]["object"]["kind"] == "Deployment");
    let applied = &apply.context("no apply")?["args"]["object"]["spec"]["template"]["metadata"];
    ensure!(
        applied["annotations"][annotation] == version.as_str(),
        "{applied:#}"
    );
    for (file, _) in &taped {
        let text = std::fs::read_to_string(file)?;
        let encoded = "czNjcjN0LXRva2VuLWZvci10aGUtcmVjb3Jk"; // base64 of TOKEN
        ensure!(
            !text.contains(TOKEN) && !text.contains(encoded),
            "{} holds the Secret",
            file.display()
        );
    }

    // Offline, the same plugin goes exactly as it went.
    let settings_file = dir.path().join("deployment-reconcile.settings.yaml");
    let (passed, stdout, stderr) = replay(&settings_file, recorded.path())?;
    ensure!(passed, "{stderr}\n{stdout}");
    ensure!(
        stdout.matches("- transcript: ").count() == taped.len(),
        "{stdout}"
    );
    ensure!(
        stderr.contains(&format!(
            "{} reconcile(s) replayed as recorded",
            taped.len()
        )),
        "{stderr}"
    );

    // The Secret answered at another version: the plugin applies another Pod
    // template, and the replay names that call.
    let changed = tempfile::tempdir()?;
    let mut tampered: Value = serde_saphyr::from_str(&std::fs::read_to_string(vault_file)?)?;
    for call in tampered["calls"].as_array_mut().into_iter().flatten() {
        if call["call"] == "get" && call["args"]["object"]["kind"] == "v1/Secret" {
            call["answer"]["ok"]["metadata"]["resourceVersion"] = json!("999999");
        }
    }
    std::fs::write(
        changed.path().join("000001.yaml"),
        serde_saphyr::to_string(&tampered)?,
    )?;
    let (passed, _, stderr) = replay(&settings_file, changed.path())?;
    ensure!(!passed, "a changed answer replayed as recorded: {stderr}");
    ensure!(
        stderr.contains("is apply {")
            && stderr.contains("\"999999\"")
            && stderr.contains("but the transcript has apply"),
        "{stderr}"
    );

    // A recorded call the plugin no longer makes is warned about.
    let extra = tempfile::tempdir()?;
    let mut longer = vault.clone();
    let again = calls(vault).last().cloned().context("no calls")?;
    longer["calls"].as_array_mut().context("calls")?.push(again);
    std::fs::write(
        extra.path().join("000001.yaml"),
        serde_saphyr::to_string(&longer)?,
    )?;
    let (passed, _, stderr) = replay(&settings_file, extra.path())?;
    ensure!(
        passed && stderr.contains("1 recorded call(s) the plugin did not make"),
        "{stderr}"
    );
    Ok(())
}

/// The calls of a transcript.
fn calls(transcript: &Value) -> impl Iterator<Item = &Value> {
    transcript["calls"].as_array().into_iter().flatten()
}
