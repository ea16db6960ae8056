//! Objects the host cannot decode cost themselves only: a `WasmPlugin` whose settings
//! nest past the decoder's limit (the API server takes it) is refused on its own —
//! `Ready=False Undecodable` in its status, a `PluginFailed` Event, counted in
//! `wcm_informer_undecodable_objects` — while a valid `WasmPlugin` beside it runs,
//! before and after a restart (the list path), and is paused and deleted as asked; a
//! custom resource too deep to decode leaves the other objects of its kind served to
//! the plugin watching it. The CRD refuses what it can bound (a status count past its
//! maximum, a pull Secret that is no Secret's name), and names that cannot be a
//! plugin's are refused in status naming the rule.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use wcm_daemon::wasmplugin::{WasmPlugin, WasmPluginStatus};

use crate::support::wasm_plugins::{
    WAIT, condition, has, host, is_ready, mirrored, mirrored_to, push_label_mirror, set_spec,
    setup, source, status_until, wasm_plugin,
};
use crate::support::{self, eventually};

/// `{"a": {"a": ... 1}}`, `depth` objects deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(1), |inner, _| json!({ "a": inner }))
}

/// Creates the object `body` at `path` with a raw request: the typed clients cannot
/// decode the answer for an object too deep (which is the point).
async fn create_raw(client: &Client, path: &str, body: &Value) -> Result<()> {
    let request = http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(body.to_string().into_bytes())?;
    client
        .request_text(request)
        .await
        .map(|_| ())
        .context(format!("POST {path}"))
}

#[support::test]
async fn a_wasm_plugin_the_host_cannot_decode_costs_only_itself() -> Result<()> {
    let (registry, ns) = setup("wasm-deep").await?;
    let repo = push_label_mirror(&registry)?;
    let image = format!("{repo}:v1");
    let path = format!(
        "/apis/wasm-controller-manager.io/v1alpha1/namespaces/{}/wasmplugins",
        ns.name()
    );
    let deep = json!({"apiVersion": "wasm-controller-manager.io/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "deep"}, "spec": {"image": image, "pullSecret": "pull",
        "settings": {"x": nested(130)}}});
    create_raw(&ns.client(), &path, &deep).await?;
    let api: Api<WasmPlugin> = Api::namespaced(ns.client(), ns.name());
    let valid = wasm_plugin("mirror", json!({"image": image, "pullSecret": "pull"}))?;
    api.create(&PostParams::default(), &valid).await?;
    for name in ["member-0123456789ab", "a.b"] {
        let bad = wasm_plugin(name, json!({"image": image, "pullSecret": "pull"}))?;
        api.create(&PostParams::default(), &bad).await?;
    }

    let dir = tempfile::tempdir()?;
    let first = host(&ns, &registry, dir.path())?;
    status_until(&api, "mirror", "Ready=True", is_ready).await?;
    source(&ns, "first", "one").await?;
    mirrored(&ns, "first", "one").await?;
    undecodable_is_reported(&ns.client(), ns.name(), &first).await?;
    for name in ["member-0123456789ab", "a.b"] {
        let refused = |s: &WasmPluginStatus| has(s, "Ready", "False", "InvalidName");
        let status = status_until(&api, name, "InvalidName", refused).await?;
        let said = condition(&status, "Ready").map(|c| c.2).unwrap_or_default();
        ensure!(said.contains("cannot be a plugin's"), "{name}: {said}");
    }

    // Restarted, the host lists: the valid one runs again, the deep one is refused.
    drop(first);
    let second = host(&ns, &registry, dir.path())?;
    source(&ns, "second", "two").await?;
    mirrored(&ns, "second", "two").await?;
    second
        .wait_for_log(&["WasmPlugin refused", "deep"], WAIT)
        .await?;
    set_spec(&api, "mirror", json!({"paused": true})).await?;
    let paused = |s: &WasmPluginStatus| s.state.as_deref() == Some("paused");
    status_until(&api, "mirror", "paused", paused).await?;

    // The CRD bounds a status count and a pull Secret's name.
    let bad_status = json!({"status": {"rules": {"declared": 4294967296u64, "granted": 0}}});
    let patch = kube::api::Patch::Merge(&bad_status);
    let refused = api
        .patch_status("mirror", &Default::default(), &patch)
        .await;
    ensure!(
        refused.is_err(),
        "the API server took a count past the maximum"
    );
    let slash = wasm_plugin(
        "slash",
        json!({"image": image, "pullSecret": "../configmaps/x"}),
    )?;
    ensure!(
        api.create(&PostParams::default(), &slash).await.is_err(),
        "a pull Secret path"
    );

    // Deleted, the deep one is counted no more.
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::erase::<WasmPlugin>(&()),
    );
    let _ = raw.delete("deep", &Default::default()).await;
    let kind = [("kind", "wasm-controller-manager.io/v1alpha1/WasmPlugin")];
    let cleared = eventually(WAIT, || async {
        let n = second
            .metric("wcm_informer_undecodable_objects", &kind)
            .await
            .ok()?;
        (n == 0.0).then_some(())
    })
    .await;
    ensure!(cleared.is_some(), "the deleted WasmPlugin is still counted");
    Ok(())
}

/// The deep `WasmPlugin` is refused in its status, counted, and an Event says so.
async fn undecodable_is_reported(
    client: &Client,
    namespace: &str,
    host: &support::HostProcess,
) -> Result<()> {
    let raw: Api<WasmPlugin> = Api::namespaced(client.clone(), namespace);
    // Its status, read as text: the object itself does not decode here either.
    let status = eventually(WAIT, || async {
        let path = format!(
            "/apis/wasm-controller-manager.io/v1alpha1/namespaces/{namespace}/wasmplugins/deep"
        );
        let request = http::Request::get(path).body(Vec::new()).ok()?;
        let text = client.request_text(request).await.ok()?;
        let ready = r#""reason":"Undecodable""#;
        (text.contains(ready) && text.contains(r#""state":"failed""#)).then_some(text)
    })
    .await;
    let status = status.context("the deep WasmPlugin's status never said Undecodable")?;
    ensure!(
        status.contains("recursion limit exceeded"),
        "the cause is not said"
    );
    let kind = [("kind", "wasm-controller-manager.io/v1alpha1/WasmPlugin")];
    let counted = host
        .metric("wcm_informer_undecodable_objects", &kind)
        .await?;
    ensure!(counted == 1.0, "counted {counted}");
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let failed = eventually(WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("PluginFailed")
                && e.involved_object.name.as_deref() == Some("deep")
        })
    })
    .await;
    ensure!(
        failed.is_some(),
        "no PluginFailed Event about the deep WasmPlugin"
    );
    drop(raw);
    Ok(())
}

/// A CRD of `blobs.wcm.test` whose spec holds anything.
fn blob_crd() -> Result<
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "blobs.wcm.test"},
        "spec": {"group": "wcm.test", "scope": "Namespaced",
            "names": {"plural": "blobs", "singular": "blob", "kind": "Blob"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}))?)
}

#[support::test]
async fn a_custom_resource_too_deep_to_decode_leaves_its_kind_served() -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let plane = wcm_control_plane::ControlPlane::shared()?;
    let admin = plane.admin_client().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let params = kube::api::PatchParams::apply("wcm-tests").force();
    crds.patch(
        "blobs.wcm.test",
        &params,
        &kube::api::Patch::Apply(&blob_crd()?),
    )
    .await?;
    let ns = wcm_control_plane::TestNamespace::create("deep-blobs").await?;
    let path = format!("/apis/wcm.test/v1/namespaces/{}/blobs", ns.name());
    let blob = |name: &str, spec: Value| {
        json!({"apiVersion": "wcm.test/v1", "kind": "Blob", "metadata": {"name": name,
            "labels": {"wcm.test/source": name}}, "spec": spec})
    };
    let served = eventually(WAIT, || async {
        create_raw(&ns.client(), &path, &blob("before", json!({"a": 1})))
            .await
            .ok()
    })
    .await;
    served.context("the Blob CRD was not served")?;
    create_raw(&ns.client(), &path, &blob("deep", nested(130))).await?;

    let settings = json!({"also-kind": {"group": "wcm.test", "version": "v1", "kind": "Blob"}});
    let dir =
        support::plugins_dir(&[("label-mirror.wasm", support::plugin_bytes("label-mirror"))])?;
    std::fs::write(
        dir.path().join("label-mirror.settings.json"),
        settings.to_string(),
    )?;
    let host = support::HostProcess::start(dir.path(), &[])?;
    let blobs: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "wcm.test", "v1", "Blob",
        )),
    );
    let mirrored_blob = |name: &'static str| {
        let blobs = blobs.clone();
        async move {
            eventually(WAIT, || async {
                let b = blobs.get(name).await.ok()?;
                let labels = b.metadata.labels?;
                (labels.get("wcm.test/mirrored").map(String::as_str) == Some(name)).then_some(())
            })
            .await
            .with_context(|| format!("Blob {name} was not mirrored"))
        }
    };
    mirrored_blob("before").await?;
    create_raw(&ns.client(), &path, &blob("after", json!({"b": [1, 2]}))).await?;
    mirrored_blob("after").await?;
    host.wait_for_log(&["an object this host cannot decode", "deep"], WAIT)
        .await?;
    // A Warning Event on the object itself says so.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(ns.client(), ns.name());
    let said = eventually(WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Undecodable")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("deep")
        })
    })
    .await;
    let said = said.context("no Undecodable Event on the deep Blob")?;
    let note = said.note.unwrap_or_default();
    ensure!(
        note.contains("recursion limit"),
        "the note names no cause: {note}"
    );
    let kind = [("kind", "wcm.test/v1/Blob")];
    ensure!(
        host.metric("wcm_informer_undecodable_objects", &kind)
            .await?
            == 1.0
    );
    // ConfigMaps, the plugin's other kind, are served too.
    source(&ns, "cm", "c").await?;
    mirrored_to(&ns, "cm", "wcm.test/mirrored", "c").await?;
    Ok(())
}
