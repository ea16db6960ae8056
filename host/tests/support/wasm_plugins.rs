//! `WasmPlugin`s from a test's side: the CRD installed, a pull Secret, a resource
//! declared and its status waited for, and a host that follows the resources of a
//! test's namespace with the local registry's CA.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wcm_control_plane::{LocalRegistry, TestNamespace};
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use super::{HostProcess, eventually};

pub const WAIT: Duration = Duration::from_secs(90);

/// Where each `WasmPlugin` test starts: the local registry, the CRD served, and a
/// namespace `prefix-…` holding the pull Secret `pull`.
pub async fn setup(prefix: &str) -> Result<(LocalRegistry, TestNamespace)> {
    let plane = wcm_control_plane::ControlPlane::shared()?;
    let registry = plane.registry()?;
    install_crd(&plane.admin_client().await?).await?;
    let ns = TestNamespace::create(prefix).await?;
    pull_secret(&ns, &registry).await?;
    Ok((registry, ns))
}

/// Installs the `WasmPlugin` CRD of `deploy/crds/` and waits until it is served.
pub async fn install_crd(client: &Client) -> Result<()> {
    let yaml = std::fs::read_to_string(super::docs::repo("deploy/crds/wasmplugins.yaml"))?;
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&yaml)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("wcm-tests").force();
    let name = "wasmplugins.wasm-controller-manager.io";
    crds.patch(name, &params, &Patch::Apply(&crd)).await?;
    let api: Api<WasmPlugin> = Api::all(client.clone());
    let served = eventually(WAIT, || async { api.list(&Default::default()).await.ok() }).await;
    served
        .map(|_| ())
        .context("the WasmPlugin CRD was not served")
}

/// The pull Secret of `registry` in `ns`.
pub async fn pull_secret(ns: &TestNamespace, registry: &LocalRegistry) -> Result<()> {
    let config = json!({"auths": {(&registry.address): {
        "username": registry.user, "password": registry.password}}});
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()}}))?;
    let api: Api<Secret> = Api::namespaced(ns.client(), ns.name());
    api.create(&PostParams::default(), &secret).await?;
    Ok(())
}

/// The `Ready`/`Loaded`/`Pulled` condition of `status`: (status, reason, message).
pub fn condition(status: &WasmPluginStatus, kind: &str) -> Option<(String, String, String)> {
    let c = status.conditions.iter().find(|c| c.type_ == kind)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until `plugin`'s status passes `check`; the last status seen on failure.
pub async fn status_until(
    api: &Api<WasmPlugin>,
    plugin: &str,
    what: &str,
    check: impl Fn(&WasmPluginStatus) -> bool,
) -> Result<WasmPluginStatus> {
    let check = &check;
    let found = eventually(WAIT, || async move {
        let status = api.get(plugin).await.ok()?.status?;
        check(&status).then_some(status)
    })
    .await;
    match found {
        Some(status) => Ok(status),
        None => {
            let last = api.get(plugin).await.ok().and_then(|p| p.status);
            anyhow::bail!("{plugin}: {what} never came; last status: {last:#?}")
        }
    }
}

/// Sets `spec` fields of `plugin`.
pub async fn set_spec(api: &Api<WasmPlugin>, plugin: &str, spec: serde_json::Value) -> Result<()> {
    let patch = Patch::Merge(json!({ "spec": spec }));
    api.patch(plugin, &PatchParams::default(), &patch).await?;
    Ok(())
}

/// Waits until the ConfigMap `name` carries `wcm.test/mirrored=value`.
pub async fn mirrored(ns: &TestNamespace, name: &str, value: &str) -> Result<()> {
    mirrored_to(ns, name, "wcm.test/mirrored", value).await
}

/// Waits until ConfigMap `name` carries `key=value` (label-mirror told by its settings
/// to write `key`).
pub async fn mirrored_to(ns: &TestNamespace, name: &str, key: &str, value: &str) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let found = eventually(WAIT, || async {
        let cm = api.get(name).await.ok()?;
        let labels = cm.metadata.labels?;
        (labels.get(key).map(String::as_str) == Some(value)).then_some(())
    })
    .await;
    found.with_context(|| format!("{name} was not given {key}={value}"))
}

/// A ConfigMap labelled `wcm.test/source=value`.
pub async fn source(ns: &TestNamespace, name: &str, value: &str) -> Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wcm.test/source": value}}}))?;
    Api::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(())
}

/// The host following the `WasmPlugin`s of `ns`, with an empty plugins directory.
pub fn host(ns: &TestNamespace, registry: &LocalRegistry, dir: &Path) -> Result<HostProcess> {
    host_with(ns, registry, dir, &[])
}

/// [`host`] with `extra` flags.
pub fn host_with(
    ns: &TestNamespace,
    registry: &LocalRegistry,
    dir: &Path,
    extra: &[&str],
) -> Result<HostProcess> {
    let pulled = dir.join("pulled");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    let flags = [
        "--wasm-plugin-namespace",
        ns.name(),
        "--registry-ca-file",
        registry.ca_file.to_str().context("path")?,
        "--pulled-plugins-dir",
        pulled.to_str().context("path")?,
    ];
    HostProcess::start(&plugins, &[&flags[..], extra].concat())
}

/// The file a host with `dir` keeps the component of `bytes` in, once pulled.
pub fn kept_layer(dir: &Path, bytes: &[u8]) -> std::path::PathBuf {
    let hex = super::registry::sha256_hex(bytes);
    dir.join("pulled/layers/sha256").join(hex)
}

/// label-mirror pushed to a repository of the calling test's own as `v1`: the
/// repository.
pub fn push_label_mirror(registry: &LocalRegistry) -> Result<String> {
    let repo = super::registry::repository(registry, "label-mirror");
    let bytes = std::fs::read(super::plugin_file("label-mirror"))?;
    super::registry::push(registry, &repo, "v1", &bytes)?;
    Ok(repo)
}

/// A `WasmPlugin` named `name` with `spec` (`image`, `pullSecret`, ...).
pub fn wasm_plugin(
    name: &str,
    spec: serde_json::Value,
) -> Result<wcm_daemon::wasmplugin::WasmPlugin> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "wasm-controller-manager.io/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": name}, "spec": spec}))?)
}

/// Whether `status` has the condition `kind` with `status` and `reason`.
pub fn has(status: &WasmPluginStatus, kind: &str, value: &str, reason: &str) -> bool {
    condition(status, kind).is_some_and(|c| c.0 == value && c.1 == reason)
}

/// Whether a status says its pull was refused for `reason` (`Pulled=False`).
pub fn pull_refused(reason: &'static str) -> impl Fn(&WasmPluginStatus) -> bool {
    move |status| has(status, "Pulled", "False", reason)
}

/// Whether `status` says `Ready=True`.
pub fn is_ready(status: &WasmPluginStatus) -> bool {
    condition(status, "Ready").is_some_and(|c| c.0 == "True")
}
