//! Contract 0.3's watch options against the real API server: a plugin watching
//! ConfigMaps in two namespaces (not a third), except those a field selector leaves
//! out, holding metadata only, and woken by label changes but not by data changes.
//! Its informers are shared per namespace and shown with their view in `/metrics`.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::objects::{create_config_map, events_about, set_config_map_label};
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::ControlPlane;
use wcm_daemon::status::State;

const CONVERGE: Duration = Duration::from_secs(60);
const PLUGIN: &str = "watch-options";
const STEP: &str = "wcm.test/step";
/// The plugin's two namespaces, and one it does not watch.
const WATCHED: [&str; 2] = ["wcm-watch-a", "wcm-watch-b"];
const UNWATCHED: &str = "wcm-watch-c";

/// The three namespaces, present and without ConfigMaps from an earlier run (kept
/// between runs: deleting a namespace takes longer than emptying it).
async fn fresh_namespaces(client: &Client) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in WATCHED.iter().chain([&UNWATCHED]) {
        if namespaces.get_opt(name).await?.is_none() {
            let ns = serde_json::from_value(json!({"metadata": {"name": name}}))?;
            namespaces.create(&PostParams::default(), &ns).await?;
        }
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), name);
        let params = ListParams::default().labels(STEP);
        cms.delete_collection(&DeleteParams::default(), &params)
            .await?;
    }
    Ok(())
}

/// The notes of the plugin's `Seen<step>` Events about the ConfigMap `namespace/name`
/// of this run (by uid: an earlier run's Events stay for an hour).
async fn seen(client: &Client, namespace: &str, name: &str, step: u32) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Ok(Some(cm)) = cms.get_opt(name).await else {
        return Vec::new();
    };
    let events = events_about(client, namespace, name, &format!("Seen{step}")).await;
    (events.unwrap_or_default().into_iter())
        .filter(|e| e.reporting_controller.as_deref() == Some(PLUGIN))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_ref()) == cm.metadata.uid.as_ref())
        .filter_map(|e| e.note)
        .collect()
}

/// Waits for a `Seen<step>` Event about `namespace/name` with `note`.
async fn wait_seen(
    client: &Client,
    (namespace, name): (&str, &str),
    step: u32,
    note: &str,
) -> Result<()> {
    let found = eventually(CONVERGE, || async {
        let notes = seen(client, namespace, name, step).await;
        notes.iter().any(|n| n == note).then_some(())
    })
    .await;
    found.with_context(|| format!("no Seen {note:?} about {namespace}/{name}"))
}

/// Reconciles finished, once there are at least `at_least`, the plugin's queue is
/// empty and no reconcile runs (a write's own watch event may still be on its way
/// when the queue first looks empty).
async fn settled_reconciles(host: &HostProcess, at_least: f64) -> Result<f64> {
    let controller = [("controller", PLUGIN)];
    let queue = [("name", PLUGIN)];
    let settled = eventually(CONVERGE, || async {
        let total = (host.metric("controller_runtime_reconcile_total", &controller)).await;
        let depth = host.metric("workqueue_depth", &queue).await.ok()?;
        let active = (host.metric("controller_runtime_active_workers", &controller)).await;
        let total = total.ok()?;
        (total >= at_least && depth == 0.0 && active.ok()? == 0.0).then_some(total)
    })
    .await;
    settled.with_context(|| format!("the plugin did not settle after {at_least} reconciles"))
}

#[support::test]
async fn watches_by_namespaces_field_selector_metadata_only_and_label_changes() -> Result<()> {
    let client = ControlPlane::shared()?.admin_client().await?;
    fresh_namespaces(&client).await?;
    let dir = plugins_dir(&[("watch-options.wasm", plugin_bytes(PLUGIN))])?;
    let host = HostProcess::start(dir.path(), &[])?;
    host.row_in("watch-options.wasm", State::Running, CONVERGE)
        .await?;
    let (a, b) = (WATCHED[0], WATCHED[1]);
    for ns in [a, b, UNWATCHED] {
        create_config_map(&client, ns, "one", &[(STEP, "1")]).await?;
    }
    create_config_map(&client, a, "ignored", &[(STEP, "1")]).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), a);
    let data = json!({"data": {"secret-ish": "not for the cache"}});
    cms.patch("one", &PatchParams::default(), &Patch::Merge(&data))
        .await?;

    // Both watched namespaces, metadata only: the data is not in what it was given.
    wait_seen(&client, (a, "one"), 1, "data=absent").await?;
    wait_seen(&client, (b, "one"), 1, "data=absent").await?;
    let first = settled_reconciles(&host, 4.0).await?;
    ensure!(
        seen(&client, UNWATCHED, "one", 1).await.is_empty(),
        "saw an unwatched namespace"
    );
    ensure!(
        seen(&client, a, "ignored", 1).await.is_empty(),
        "saw what the field selector leaves out"
    );

    // Its own label woke it a second time; its own data write did not wake it a third.
    ensure!(
        first == 4.0,
        "{first} reconciles of a/one and b/one, not 2 each"
    );
    let data = cms.get("one").await?.data.unwrap_or_default();
    ensure!(
        data.get("seen-by").map(String::as_str) == Some("watch-options"),
        "{data:?}"
    );

    // A data change does not wake it; a label change does. The ConfigMap `two`,
    // created after the data change in the same namespace (one watch stream, in
    // order), is the barrier: once it is seen and the queue is empty, the data change
    // has been delivered and filtered.
    let more = json!({"data": {"secret-ish": "changed"}});
    cms.patch("one", &PatchParams::default(), &Patch::Merge(&more))
        .await?;
    create_config_map(&client, a, "two", &[(STEP, "1")]).await?;
    wait_seen(&client, (a, "two"), 1, "data=absent").await?;
    // A pause, so that a wake by `two`'s own data write (the event after its second
    // reconcile) would be counted too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_data = settled_reconciles(&host, first + 2.0).await?;
    ensure!(
        after_data == first + 2.0,
        "reconciles went from {first} to {after_data} (2 are two's): the data change woke the plugin"
    );
    set_config_map_label(&client, a, "one", STEP, "2").await?;
    wait_seen(&client, (a, "one"), 2, "data=absent").await?;
    let after_label = settled_reconciles(&host, after_data + 1.0).await?;
    ensure!(
        after_label == after_data + 1.0,
        "{after_label} after {after_data}"
    );

    // One informer per namespace, each holding metadata.
    for ns in WATCHED {
        let labels = [
            ("kind", "v1/ConfigMap"),
            ("namespace", ns),
            ("view", "metadata"),
        ];
        let held = host.metric("wcm_informer_objects", &labels).await?;
        ensure!(held >= 1.0, "no metadata informer for {ns}: {held}");
    }
    Ok(())
}
