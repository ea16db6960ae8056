//! `push` and `pull` against the local registry (CNCF Distribution, TLS by the
//! cluster's CA, basic auth), as a user runs them: the CNCF Wasm layout on the wire,
//! the pushed reference pinned to its digest as the last line, the same component
//! back by tag or digest, credentials from `--password-stdin` or the Docker config
//! file, the older layer media type read, and what is not a plugin refused naming the
//! reference and the cause.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use oci_client::client::{ClientConfig, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use wcm_control_plane::{ControlPlane, LocalRegistry};
use wcm_core::registry::{LEGACY_WASM_LAYER, WASM_CONFIG, WASM_LAYER};

use crate::support;
use crate::support::registry::repository;

/// What one `push` or `pull` printed.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs the host's `args` with `password` on standard input and `docker_config` as
/// `DOCKER_CONFIG` (none: an empty directory, so the user's own file is not read).
fn cli(args: &[&str], password: Option<&str>, docker_config: &Path) -> Result<Ran> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
        .args(args)
        .env("DOCKER_CONFIG", docker_config)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    if let Some(password) = password {
        writeln!(stdin, "{password}")?;
    }
    drop(stdin);
    let out = child.wait_with_output()?;
    Ok(Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn registry() -> Result<LocalRegistry> {
    Ok(ControlPlane::shared()?.registry()?)
}

/// `push` with `--username`/`--password-stdin`.
fn push(registry: &LocalRegistry, file: &Path, reference: &str, config: &Path) -> Result<Ran> {
    let file = file.to_str().context("path")?;
    let ca = registry.ca_file.to_str().context("path")?;
    let args = ["push", file, reference, "--ca-file", ca];
    let login = ["--username", &registry.user, "--password-stdin"];
    cli(
        &[&args[..], &login[..]].concat(),
        Some(&registry.password),
        config,
    )
}

/// `pull` with `--username`/`--password-stdin` and `extra` flags.
fn pull(registry: &LocalRegistry, reference: &str, out: &Path, extra: &[&str]) -> Result<Ran> {
    let (out, ca) = (
        out.to_str().context("path")?,
        registry.ca_file.to_str().context("path")?,
    );
    let args = ["pull", reference, "-o", out, "--ca-file", ca];
    let login = ["--username", &registry.user, "--password-stdin"];
    let empty = tempfile::tempdir()?;
    cli(
        &[&args[..], &login[..], extra].concat(),
        Some(&registry.password),
        empty.path(),
    )
}

#[support::test]
async fn a_pushed_plugin_comes_back_the_same_by_tag_and_by_digest() -> Result<()> {
    let registry = registry()?;
    let file = support::plugin_file("pod-counter");
    let tagged = format!("{}:v1", repository(&registry, "pod-counter"));
    let empty = tempfile::tempdir()?;
    let pushed = push(&registry, &file, &tagged, empty.path())?;
    ensure!(pushed.ok, "push failed: {}", pushed.stderr);
    let last = pushed.stdout.lines().last().unwrap_or_default();
    let digest = (last.strip_prefix(&format!("{tagged}@")))
        .with_context(|| format!("last line {last:?} is not {tagged}@<digest>"))?;
    ensure!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );

    let out = empty.path().join("pulled.wasm");
    let by_tag = pull(&registry, &tagged, &out, &[])?;
    ensure!(by_tag.ok, "pull by tag failed: {}", by_tag.stderr);
    ensure!(
        by_tag.stdout.trim_end() == last,
        "{} != {last}",
        by_tag.stdout
    );
    ensure!(
        std::fs::read(&out)? == std::fs::read(&file)?,
        "pulled bytes differ"
    );

    let untagged = tagged.trim_end_matches(":v1");
    let by_digest = pull(&registry, &format!("{untagged}@{digest}"), &out, &[])?;
    ensure!(by_digest.ok, "pull by digest failed: {}", by_digest.stderr);
    ensure!(
        std::fs::read(&out)? == std::fs::read(&file)?,
        "pulled bytes differ"
    );

    // The same component pushed again is the same artifact: no spurious upgrade.
    let again = push(&registry, &file, &tagged, empty.path())?;
    ensure!(
        again.stdout.lines().last() == Some(last),
        "{}",
        again.stdout
    );
    Ok(())
}

/// A credential helper `docker-credential-NAME` in a directory of its own, which keeps
/// `registry`'s credentials (and says it has none for any other server).
fn credential_helper(dir: &Path, name: &str, registry: &LocalRegistry) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let answer = serde_json::json!({"ServerURL": registry.address, "Username": registry.user,
        "Secret": registry.password});
    let script = format!(
        "#!/bin/sh\nread server\nif [ \"$1\" = get ] && [ \"$server\" = '{}' ]; then\n  \
         printf '%s' '{answer}'\nelse\n  echo 'credentials not found in native keychain'\n  \
         exit 1\nfi\n",
        registry.address
    );
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[support::test]
async fn credential_helpers_are_run_as_docker_runs_them() -> Result<()> {
    let registry = registry()?;
    let file = support::plugin_file("pod-counter");
    let tagged = format!("{}:v1", repository(&registry, "helper"));
    let empty = tempfile::tempdir()?;
    ensure!(push(&registry, &file, &tagged, empty.path())?.ok, "push");
    let bin = tempfile::tempdir()?;
    credential_helper(bin.path(), "wcmtest", &registry)?;
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH")?);
    let ca = registry.ca_file.to_str().context("path")?;
    let out = empty.path().join("pulled.wasm");
    // `pull` with a Docker config of `config` and `path` as PATH.
    let pull_with = |config: &serde_json::Value, path: &str| -> Result<(bool, String)> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("config.json"), config.to_string())?;
        let out = out.to_str().context("path")?;
        let ran = Command::new(env!("CARGO_BIN_EXE_wasm-controller-manager"))
            .args(["pull", &tagged, "-o", out, "--ca-file", ca])
            .env("DOCKER_CONFIG", dir.path())
            .env("PATH", path)
            .env("RUST_BACKTRACE", "0")
            .output()?;
        let said = String::from_utf8_lossy(&ran.stderr).into_owned();
        Ok((ran.status.success(), said))
    };
    // `credHelpers` for this registry, then `credsStore` for every registry, as
    // `docker login` on a desktop or a cloud CLI leaves them; no inline `auth`.
    for config in [
        serde_json::json!({"credHelpers": {(&registry.address): "wcmtest"}}),
        serde_json::json!({"credsStore": "wcmtest", "auths": {(&registry.address): {}}}),
    ] {
        let (ok, said) = pull_with(&config, &path)?;
        ensure!(ok, "{config}: {said}");
        let same = std::fs::read(&out)? == std::fs::read(&file)?;
        ensure!(same, "{config}: other bytes");
    }
    // A helper that is not there is named.
    let absent = serde_json::json!({"credsStore": "wcm-absent"});
    let (ok, said) = pull_with(&absent, &std::env::var("PATH")?)?;
    ensure!(
        !ok && said.contains("docker-credential-wcm-absent"),
        "{said}"
    );
    Ok(())
}

#[support::test]
async fn credentials_come_from_the_docker_config_and_a_wrong_one_is_refused() -> Result<()> {
    let registry = registry()?;
    let file = support::plugin_file("pod-counter");
    let file = file.to_str().context("path")?;
    let tagged = format!("{}:v1", repository(&registry, "login"));
    let ca = registry.ca_file.to_str().context("path")?;
    let config = tempfile::tempdir()?;
    let login = |password: &str| {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{password}", registry.user));
        let json = serde_json::json!({"auths": {(&registry.address): {"auth": auth}}});
        std::fs::write(config.path().join("config.json"), json.to_string())
    };
    login(&registry.password)?;
    let pushed = cli(
        &["push", file, &tagged, "--ca-file", ca],
        None,
        config.path(),
    )?;
    ensure!(
        pushed.ok,
        "push with the Docker config failed: {}",
        pushed.stderr
    );

    login("wrong")?;
    let refused = cli(
        &["push", file, &tagged, "--ca-file", ca],
        None,
        config.path(),
    )?;
    ensure!(!refused.ok, "a wrong password was let in");
    ensure!(
        refused
            .stderr
            .contains(&format!("{tagged}: not authorized")),
        "{}",
        refused.stderr
    );
    let anonymous = tempfile::tempdir()?;
    let out = anonymous.path().join("x.wasm");
    let out = out.to_str().context("path")?;
    let refused = cli(
        &["pull", &tagged, "-o", out, "--ca-file", ca],
        None,
        anonymous.path(),
    )?;
    ensure!(
        !refused.ok
            && refused
                .stderr
                .contains(&format!("{tagged}: not authorized")),
        "{}",
        refused.stderr
    );

    // A registry whose CA is not trusted cannot be reached, and says why.
    let untrusted = cli(&["pull", &tagged, "-o", out], None, config.path())?;
    ensure!(
        !untrusted.ok
            && untrusted.stderr.contains("the registry cannot be reached")
            && untrusted.stderr.contains("UnknownIssuer"),
        "{}",
        untrusted.stderr
    );
    Ok(())
}

/// Pushes `layers` (media type, bytes) under `reference` with the library, as other
/// tools would write them.
async fn push_raw(
    registry: &LocalRegistry,
    reference: &str,
    layers: &[(&str, Vec<u8>)],
) -> Result<()> {
    let ca = std::fs::read(&registry.ca_file)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::new(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: ca,
        }],
        ..ClientConfig::default()
    });
    let layers: Vec<ImageLayer> = (layers.iter())
        .map(|(media_type, bytes)| ImageLayer::new(bytes.clone(), media_type.to_string(), None))
        .collect();
    let config = Config::new(b"{}".to_vec(), WASM_CONFIG.to_string(), None);
    let auth = RegistryAuth::Basic(registry.user.clone(), registry.password.clone());
    let reference: Reference = reference.parse()?;
    client
        .push(&reference, &layers, config, &auth, None)
        .await?;
    Ok(())
}

#[support::test]
async fn the_older_layer_type_is_read_and_what_is_not_a_plugin_is_refused() -> Result<()> {
    let registry = registry()?;
    let component = std::fs::read(support::plugin_file("pod-counter"))?;
    let repo = repository(&registry, "layouts");
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("pulled.wasm");

    let legacy = format!("{repo}:legacy");
    push_raw(
        &registry,
        &legacy,
        &[(LEGACY_WASM_LAYER, component.clone())],
    )
    .await?;
    let pulled = pull(&registry, &legacy, &out, &[])?;
    ensure!(
        pulled.ok,
        "the older media type was refused: {}",
        pulled.stderr
    );
    ensure!(std::fs::read(&out)? == component);

    let cases = [
        (
            "tarball",
            vec![("application/vnd.oci.image.layer.v1.tar", component.clone())],
            "the layer's media type is application/vnd.oci.image.layer.v1.tar, not a Wasm component's",
        ),
        (
            "two",
            vec![(WASM_LAYER, component.clone()), (WASM_LAYER, b"x".to_vec())],
            "the manifest has 2 layers; a plugin is one layer",
        ),
    ];
    for (tag, layers, cause) in cases {
        let reference = format!("{repo}:{tag}");
        push_raw(&registry, &reference, &layers).await?;
        let refused = pull(&registry, &reference, &out, &[])?;
        ensure!(!refused.ok, "{tag}: pulled");
        let expected = format!("{reference}: {cause}");
        ensure!(
            refused.stderr.contains(&expected),
            "{tag}: {}",
            refused.stderr
        );
    }

    // Over the bound: refused from the manifest's size, before the layer is fetched.
    let refused = pull(&registry, &legacy, &out, &["--max-mib", "0"])?;
    let expected = format!(
        "{legacy}: the component is {} bytes or more, over the bound of 0",
        component.len()
    );
    ensure!(
        !refused.ok && refused.stderr.contains(&expected),
        "{}",
        refused.stderr
    );
    Ok(())
}

#[support::test]
async fn a_pulled_plugin_is_kept_by_digest_and_credentials_come_from_a_pull_secret() -> Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    use wcm_core::registry::{PulledPlugins, Registry};
    use wcm_daemon::wasmplugin::pull_auth;

    let registry = registry()?;
    let ns = wcm_control_plane::TestNamespace::create("pull-secret").await?;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(ns.client(), ns.name());
    let docker_config = serde_json::json!({"auths": {(&registry.address): {
        "username": registry.user, "password": registry.password}}});
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": docker_config.to_string()}}))?;
    secrets.create(&Default::default(), &secret).await?;
    let opaque: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "opaque"}, "stringData": {"password": "x"}}))?;
    secrets.create(&Default::default(), &opaque).await?;

    let client = ns.client();
    let auth = pull_auth(&client, ns.name(), "pull", &registry.address).await?;
    let refused = pull_auth(&client, ns.name(), "opaque", &registry.address).await;
    let expected = format!(
        "pull Secret {}/opaque is of type Opaque, not kubernetes.io/dockerconfigjson",
        ns.name()
    );
    ensure!(
        matches!(&refused, Err(e) if e.to_string() == expected),
        "{refused:?}"
    );
    let missing = pull_auth(&client, ns.name(), "absent", &registry.address).await;
    let named = format!("pull Secret {}/absent: ", ns.name());
    ensure!(
        matches!(&missing, Err(e) if e.to_string().starts_with(&named)),
        "{missing:?}"
    );

    // Pushed, then fetched by digest with the Secret's credentials: pulled once, then
    // from disk, even with no registry at all at the address.
    let file = support::plugin_file("pod-counter");
    let tagged = format!("{}:v1", repository(&registry, "kept"));
    let empty = tempfile::tempdir()?;
    let pushed = push(&registry, &file, &tagged, empty.path())?;
    ensure!(pushed.ok, "{}", pushed.stderr);
    let pinned = pushed
        .stdout
        .lines()
        .last()
        .unwrap_or_default()
        .replace(":v1@", "@");
    let client = Registry::new(std::slice::from_ref(&registry.ca_file))?;
    let store = PulledPlugins::new(&empty.path().join("pulled"));
    let max = 128 << 20;
    let fetch = |text: String| {
        let (client, store, auth) = (&client, &store, auth.clone());
        async move {
            let reference: wcm_core::registry::Reference = text.parse()?;
            let pull = wcm_core::registry::Access::Pull;
            let mut session = client.session(&reference, auth, pull).await?;
            anyhow::Ok(store.fetch(&mut session, &reference, max).await?)
        }
    };
    let first = fetch(pinned.clone()).await?;
    ensure!(!first.cached && first.bytes == std::fs::read(&file)?);
    let again = fetch(pinned.clone()).await?;
    ensure!(again.cached && again.bytes == first.bytes, "pulled again");
    let elsewhere = pinned.replace(&registry.address, "127.0.0.1:1");
    let offline = fetch(elsewhere).await?;
    ensure!(offline.cached && offline.digest == first.digest);
    Ok(())
}

#[support::test]
async fn a_blob_that_does_not_match_its_manifest_is_refused_and_a_larger_one_cut_off() -> Result<()>
{
    let registry = registry()?;
    // A blob of this test's own: its storage is about to go bad.
    let note = format!("tampered-{}", fastrand::u64(..));
    let bytes =
        support::builds::another_build(&std::fs::read(support::plugin_file("pod-counter"))?, &note);
    let layer = support::registry::sha256_hex(&bytes);
    let tagged = format!("{}:v1", repository(&registry, "tampered"));
    support::registry::push(&registry, tagged.trim_end_matches(":v1"), "v1", &bytes)?;
    let blob = registry.blob_file(&format!("sha256:{layer}"));
    ensure!(blob.exists(), "no blob at {}", blob.display());
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("pulled.wasm");

    // Same size, one byte changed: the digest check refuses it, and nothing is written.
    let mut changed = bytes.clone();
    let last = changed.len() - 1;
    changed[last] ^= 0xff;
    std::fs::write(&blob, &changed)?;
    let refused = pull(&registry, &tagged, &out, &[])?;
    ensure!(
        !refused.ok && refused.stderr.contains(&tagged) && refused.stderr.contains(&layer),
        "{}",
        refused.stderr
    );
    ensure!(!out.exists(), "a tampered component was written");

    // Three MiB where the manifest says less: the download stops at the bound.
    std::fs::write(&blob, vec![0u8; 3 << 20])?;
    let cut = pull(&registry, &tagged, &out, &["--max-mib", "1"])?;
    ensure!(
        !cut.ok
            && cut
                .stderr
                .contains("bytes or more, over the bound of 1048576"),
        "{}",
        cut.stderr
    );
    Ok(())
}
