//! `WasmPlugin`s of any size, on the real control plane with the local registry: a
//! Rust and the 18 MB Python example timed from apply to their first reconcile, cold
//! and with the blob and compile caches warm; and a 2 GiB layer — declared in its
//! manifest, or served behind a manifest that says less — refused with the cause in
//! status, never held in memory, nothing compiled, the running plugin undisturbed.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use oci_client::client::{ClientConfig, Config};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;
use wcm_control_plane::{LocalRegistry, TestNamespace};
use wcm_core::registry::{WASM_CONFIG, WASM_LAYER};
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support::builds::another_build;
use crate::support::registry::{push, repository, sha256_hex};
use crate::support::wasm_plugins::{
    WAIT, condition, has, host_with, is_ready, kept_layer, mirrored, setup, source, status_until,
    wasm_plugin,
};
use crate::support::{self, eventually};

/// An example timed from apply to first reconcile: the object a test makes for it to
/// act on, and how the test sees that it acted.
#[derive(Clone, Copy)]
enum Timed {
    /// Python, 18 MB: labels an opted-in Pod with its phase.
    PhaseLabeller,
    /// Rust: mirrors a ConfigMap's `wcm.test/source` label.
    LabelMirror,
}

impl Timed {
    fn file(self) -> &'static str {
        match self {
            Timed::PhaseLabeller => "phase-labeller",
            Timed::LabelMirror => "label-mirror",
        }
    }

    /// An object named `name` for the plugin to act on.
    async fn object(self, ns: &TestNamespace, name: &str) -> Result<()> {
        match self {
            Timed::PhaseLabeller => tracked_pod(ns, name).await,
            Timed::LabelMirror => source(ns, name, name).await,
        }
    }

    /// Waits until the plugin acted on `name`.
    async fn acted(self, ns: &TestNamespace, name: &str) -> Result<()> {
        match self {
            Timed::PhaseLabeller => phase_labelled(ns, name).await,
            Timed::LabelMirror => mirrored(ns, name, name).await,
        }
    }
}

/// A Pod of `ns` opted into phase-labeller (it stays Pending: nothing schedules it).
async fn tracked_pod(ns: &TestNamespace, name: &str) -> Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"example.com/track-phase": "true"}},
        "spec": {"containers": [{"name": "c", "image": "wcm.local/pause:1"}]}}))?;
    Api::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(())
}

/// Waits until Pod `name` is labelled with its phase.
async fn phase_labelled(ns: &TestNamespace, name: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let labelled = eventually(WAIT, || async {
        let labels = api.get(name).await.ok()?.metadata.labels?;
        (labels.get("example.com/phase").map(String::as_str) == Some("Pending")).then_some(())
    })
    .await;
    labelled.with_context(|| format!("{name} was not labelled with its phase"))
}

/// Applies the WasmPlugin `timed` for `image`, then times until it acts on a new
/// object.
async fn apply_and_time(
    api: &Api<WasmPlugin>,
    ns: &TestNamespace,
    timed: Timed,
    image: &str,
    object: &str,
) -> Result<Duration> {
    let plugin = wasm_plugin("timed", json!({"image": image, "pullSecret": "pull"}))?;
    timed.object(ns, object).await?;
    let applied = Instant::now();
    api.create(&PostParams::default(), &plugin).await?;
    timed.acted(ns, object).await?;
    Ok(applied.elapsed())
}

/// `timed` pushed and applied to a host with empty caches, deleted, then applied to a
/// new host process on the same disk: the two times, taken from the store the second.
async fn cold_and_warm(timed: Timed) -> Result<(Duration, Duration)> {
    let (registry, ns) = setup("wasm-timed").await?;
    let name = timed.file();
    let repo = repository(&registry, name);
    let bytes = std::fs::read(support::plugin_file(name))?;
    let (_, digest) = push(&registry, &repo, "v1", &bytes)?;
    let image = format!("{repo}:v1");
    let dir = tempfile::tempdir()?;
    let compiled = dir.path().join("compiled");
    let compiled = ["--compile-cache-dir", compiled.to_str().context("path")?];
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());

    // Cold: nothing pulled, nothing compiled.
    let host = host_with(&ns, &registry, dir.path(), &compiled)?;
    let cold = apply_and_time(&api, &ns, timed, &image, "cold").await?;
    let status = status_until(&api, "timed", "Ready=True", is_ready).await?;
    ensure!(
        status.digest.as_deref() == Some(digest.as_str()),
        "{status:#?}"
    );
    ensure!(has(&status, "Pulled", "True", "Pulled"), "{status:#?}");
    api.delete("timed", &Default::default()).await?;
    host.wait_for_log(&["WasmPlugin deleted", "timed"], WAIT)
        .await?;
    drop(host);

    // Warm: a new host process with the same disk: taken from the store, not pulled.
    let _host = host_with(&ns, &registry, dir.path(), &compiled)?;
    let gone = eventually(WAIT, || async {
        api.get_opt("timed").await.ok()?.is_none().then_some(())
    });
    gone.await.context("the WasmPlugin was not deleted")?;
    let warm = apply_and_time(&api, &ns, timed, &image, "warm").await?;
    let cached = |s: &WasmPluginStatus| has(s, "Pulled", "True", "Cached");
    status_until(&api, "timed", "Pulled from the store", cached).await?;
    eprintln!(
        "apply → first reconcile, {name} ({} KiB): cold {cold:?}, warm caches {warm:?}",
        bytes.len() >> 10
    );
    Ok((cold, warm))
}

#[support::test]
async fn the_python_example_runs_from_the_registry_cold_and_with_warm_caches() -> Result<()> {
    cold_and_warm(Timed::PhaseLabeller).await.map(drop)
}

#[support::test]
async fn a_rust_plugin_runs_from_the_registry_cold_and_with_warm_caches() -> Result<()> {
    cold_and_warm(Timed::LabelMirror).await.map(drop)
}

/// The SHA-256 of 2 GiB of zero bytes (`head -c 2147483648 /dev/zero | sha256sum`):
/// the digest of the sparse file this test makes a registry blob of.
const ZEROS_2_GIB: &str = "a7c744c13cc101ed66c29f672f92455547889cc586ce6d44fe76ae824958ea51";
const TWO_GIB: u64 = 2 << 30;

/// Makes `file` a sparse file of 2 GiB of zeros: no disk written.
fn two_gib_of_zeros(file: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(file.parent().context("no parent")?)?;
    std::fs::File::create(file)?.set_len(TWO_GIB)?;
    Ok(())
}

/// Pushes a manifest under `reference` whose one layer is 2 GiB of zeros, honestly
/// declared. The blob goes straight into the registry's storage (sparse) and is linked
/// into the repository, so no 2 GiB upload is needed.
async fn push_two_gib_layer(registry: &LocalRegistry, reference: &str) -> Result<()> {
    let reference: Reference = reference.parse()?;
    two_gib_of_zeros(&registry.blob_file(&format!("sha256:{ZEROS_2_GIB}")))?;
    let link = (registry.storage.join("docker/registry/v2/repositories"))
        .join(reference.repository())
        .join("_layers/sha256")
        .join(ZEROS_2_GIB)
        .join("link");
    std::fs::create_dir_all(link.parent().context("no parent")?)?;
    std::fs::write(&link, format!("sha256:{ZEROS_2_GIB}"))?;

    let config = Config::new(b"{}".to_vec(), WASM_CONFIG.to_string(), None);
    let mut manifest = OciImageManifest::build(&[], &config, None);
    manifest.layers.push(OciDescriptor {
        media_type: WASM_LAYER.to_string(),
        digest: format!("sha256:{ZEROS_2_GIB}"),
        size: TWO_GIB as i64,
        ..Default::default()
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::new(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: std::fs::read(&registry.ca_file)?,
        }],
        ..ClientConfig::default()
    });
    let auth = RegistryAuth::Basic(registry.user.clone(), registry.password.clone());
    (client.push(&reference, &[], config, &auth, Some(manifest))).await?;
    Ok(())
}

#[support::test]
async fn a_two_gib_layer_is_refused_unread_and_a_lying_one_cut_off_at_the_bound() -> Result<()> {
    let (registry, ns) = setup("wasm-huge").await?;
    let repo = repository(&registry, "huge");
    let mirror = std::fs::read(support::plugin_file("label-mirror"))?;
    push(&registry, &repo, "small", &mirror)?;
    push_two_gib_layer(&registry, &format!("{repo}:declared")).await?;
    // A build of its own whose blob the registry's storage then serves as 2 GiB.
    let lying = another_build(&mirror, &format!("lying-{}", fastrand::u64(..)));
    push(&registry, &repo, "lying", &lying)?;
    two_gib_of_zeros(&registry.blob_file(&format!("sha256:{}", sha256_hex(&lying))))?;

    let dir = tempfile::tempdir()?;
    let host = host_with(&ns, &registry, dir.path(), &["--max-plugin-file-mib", "16"])?;
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    for (name, tag) in [
        ("mirror", "small"),
        ("declared", "declared"),
        ("lying", "lying"),
    ] {
        let spec = json!({"image": format!("{repo}:{tag}"), "pullSecret": "pull"});
        api.create(&PostParams::default(), &wasm_plugin(name, spec)?)
            .await?;
    }
    status_until(&api, "mirror", "Ready=True", is_ready).await?;
    let too_large = |s: &WasmPluginStatus| has(s, "Pulled", "False", "TooLarge");
    for (name, said) in [
        ("declared", format!("is {TWO_GIB} bytes or more")),
        ("lying", "over the bound of 16777216".to_string()),
    ] {
        let status = status_until(&api, name, "Pulled=False TooLarge", too_large).await?;
        let message = condition(&status, "Pulled")
            .map(|c| c.2)
            .unwrap_or_default();
        ensure!(
            message.contains(&said) && message.contains(&repo),
            "{name}: {message}"
        );
        ensure!(
            has(&status, "Loaded", "Unknown", "NotPulled"),
            "{status:#?}"
        );
        ensure!(status.digest.is_none(), "{name} runs: {status:#?}");
    }

    // Nothing kept, nothing held: the host never had more than its bound in memory.
    ensure!(
        !kept_layer(dir.path(), &lying).exists(),
        "the lying layer was kept"
    );
    let peak_mib = support::resources(host.pid())?.peak_rss_kib >> 10;
    ensure!(peak_mib < 1024, "the host's peak memory was {peak_mib} MiB");
    eprintln!("host peak memory with a 2 GiB layer refused: {peak_mib} MiB");
    // The running plugin was not disturbed.
    source(&ns, "after", "after").await?;
    mirrored(&ns, "after", "after").await?;
    Ok(())
}
