//! Each `WasmPlugin` pulls with the credentials of its own pull Secret as that Secret
//! is now, never with what another pull left behind: one without a pull Secret is
//! refused by the local registry (basic auth) and one with the right Secret beside it
//! runs at once; one created after that, without a Secret, is still refused; a Secret
//! mended retries its plugin's failed pull at once; a Secret revoked is refused at the
//! next pull, not used on until a restart.

use anyhow::Result;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use wcm_control_plane::{LocalRegistry, TestNamespace};
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support;
use crate::support::builds::another_build;
use crate::support::registry::{push, repository};
use crate::support::wasm_plugins::{
    WAIT, has, host, is_ready, mirrored_to, set_spec, setup, source, status_until, wasm_plugin,
};

/// A pull Secret `name` for `registry` with `password`.
async fn pull_secret(
    ns: &TestNamespace,
    registry: &LocalRegistry,
    name: &str,
    password: &str,
) -> Result<()> {
    let config = json!({"auths": {(&registry.address): {
        "username": registry.user, "password": password}}});
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name}, "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()}}))?;
    let api: Api<Secret> = Api::namespaced(ns.client(), ns.name());
    let params = PatchParams::apply("wcm-tests").force();
    api.patch(name, &params, &Patch::Apply(&secret)).await?;
    Ok(())
}

fn unauthorized(s: &WasmPluginStatus) -> bool {
    has(s, "Pulled", "False", "Unauthorized")
}

#[support::test]
async fn each_wasm_plugin_pulls_with_its_own_pull_secret_as_it_is_now() -> Result<()> {
    let (registry, ns) = setup("wasm-creds").await?;
    let repo = repository(&registry, "label-mirror");
    let bytes = std::fs::read(support::plugin_file("label-mirror"))?;
    let (_, v1_digest) = push(&registry, &repo, "v1", &bytes)?;
    push(&registry, &repo, "v2", &another_build(&bytes, "v2"))?;
    let image = format!("{repo}:v1");
    let dir = tempfile::tempdir()?;
    let host = host(&ns, &registry, dir.path())?;
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let create = |name: &str, spec: serde_json::Value| {
        let api = api.clone();
        let plugin = wasm_plugin(name, spec);
        async move { anyhow::Ok(api.create(&PostParams::default(), &plugin?).await?) }
    };

    // Anonymous first: refused. Then one with its Secret beside it: runs.
    create("anonymous", json!({ "image": image })).await?;
    status_until(&api, "anonymous", "Unauthorized", unauthorized).await?;
    let settings = json!({"mirrored-label": "wcm.test/own"});
    create(
        "own",
        json!({"image": image, "pullSecret": "pull", "settings": settings}),
    )
    .await?;
    status_until(&api, "own", "Ready=True", is_ready).await?;
    source(&ns, "first", "one").await?;
    mirrored_to(&ns, "first", "wcm.test/own", "one").await?;
    // Nothing crosses from one to another: a later one without a Secret is refused,
    // by tag and by the digest the other one's pull left on the disk.
    create("later", json!({ "image": image })).await?;
    status_until(&api, "later", "Unauthorized", unauthorized).await?;
    let by_digest = format!("{repo}@{v1_digest}");
    create("pinned", json!({ "image": by_digest })).await?;
    status_until(&api, "pinned", "Unauthorized", unauthorized).await?;

    // A wrong Secret is refused; mended, its plugin pulls again at once.
    pull_secret(&ns, &registry, "rotating", "wrong").await?;
    let settings = json!({"mirrored-label": "wcm.test/rotated"});
    create(
        "rotated",
        json!({"image": image, "pullSecret": "rotating", "settings": settings}),
    )
    .await?;
    status_until(&api, "rotated", "Unauthorized", unauthorized).await?;
    pull_secret(&ns, &registry, "rotating", &registry.password).await?;
    host.wait_for_log(
        &["its pull Secret changed: pulling again now", "rotated"],
        WAIT,
    )
    .await?;
    status_until(&api, "rotated", "Ready=True", is_ready).await?;
    mirrored_to(&ns, "first", "wcm.test/rotated", "one").await?;

    // Revoked, the Secret is refused at the next pull (a new tag), as it is now.
    pull_secret(&ns, &registry, "rotating", "revoked").await?;
    set_spec(&api, "rotated", json!({"image": format!("{repo}:v2")})).await?;
    status_until(&api, "rotated", "Unauthorized", unauthorized).await?;
    Ok(())
}
