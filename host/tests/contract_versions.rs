//! One host serves plugins built against the previous contract (0.2, from the frozen
//! `wit/compat/v0.2`, with raw bindings) and the current one (0.3, with the SDK) side
//! by side, against the real control plane: both act, each is shown with its contract,
//! and what 0.3 added works end to end (terminal errors not retried, Events with an
//! action and a related object, log fields, its own metrics on `/metrics`, a live read
//! of a kind it does not watch, a create with a generated name, a guarded merge patch
//! and an update, a finalizer that holds an object until its external record is
//! cleaned up, a delete refused by its uid precondition).

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::objects::recorded_events;
use support::{HostProcess, eventually, plugin_bytes, plugins_dir};
use wcm_control_plane::TestNamespace;
use wcm_daemon::status::State;

const CONVERGE: Duration = Duration::from_secs(60);
const SEEN_BY: &str = "wcm.test/seen-by";

async fn create(api: &Api<ConfigMap>, name: &str, data: serde_json::Value) -> Result<ConfigMap> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wcm.test/contract": ""}}, "data": data,
    }))?;
    Ok(api.create(&PostParams::default(), &cm).await?)
}

async fn seen_by(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .ok()?
        .metadata
        .labels?
        .get(SEEN_BY)
        .cloned()
}

/// A host running both plugins, each running.
async fn host_with_both() -> Result<(tempfile::TempDir, HostProcess)> {
    let dir = plugins_dir(&[
        ("contract-v0-2.wasm", plugin_bytes("contract-v0-2")),
        ("contract-v0-3.wasm", plugin_bytes("contract-v0-3")),
    ])?;
    let host = HostProcess::start(dir.path(), &[])?;
    for (file, contract) in [
        ("contract-v0-2.wasm", "wcm:controller@0.2.0"),
        ("contract-v0-3.wasm", "wcm:controller@0.3.1"),
    ] {
        let row = host.row_in(file, State::Running, CONVERGE).await?;
        assert_eq!(row.contract.as_deref(), Some(contract), "{row:?}");
    }
    Ok((dir, host))
}

#[support::test]
async fn plugins_of_both_contract_versions_run_in_one_host() -> Result<()> {
    let ns = TestNamespace::create("contracts").await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (_dir, host) = host_with_both().await?;
    create(&api, "settings", json!({})).await?;
    create(&api, "shared", json!({"related": "settings"})).await?;

    // Both label the same object (each its own value wins in turn, so look at Events).
    for (plugin, action) in [("contract-v0-2", "Reconcile"), ("contract-v0-3", "Inspect")] {
        let found = eventually(CONVERGE, || async {
            let events = recorded_events(&ns.client(), ns.name(), "shared", "SeenBy")
                .await
                .ok()?;
            let event = events
                .into_iter()
                .find(|e| e.reporting_controller.as_deref() == Some(plugin))?;
            Some(event)
        })
        .await
        .with_context(|| {
            format!(
                "no SeenBy Event from {plugin}; log:\n{}",
                host.logs().join("\n")
            )
        })?;
        assert_eq!(found.action.as_deref(), Some(action), "{found:?}");
        if plugin == "contract-v0-3" {
            let related = found.related.as_ref().context("related")?;
            assert_eq!(related.name.as_deref(), Some("settings"));
        }
    }
    let labelled = eventually(CONVERGE, || async { seen_by(&api, "shared").await }).await;
    ensure!(labelled.is_some(), "never labelled");
    let line = host
        .wait_for_log(
            &["inspected", "plugin=\"contract-v0-3\"", "shared"],
            CONVERGE,
        )
        .await?;
    assert!(
        line.contains(r#"fields="configmap=shared keys=1""#),
        "fields as one value: {line}"
    );

    // Its own metrics, on the host's /metrics with its label; the 0.2 plugin has none.
    let inspected = [("plugin", "contract-v0-3"), ("namespace", ns.name())];
    let counted = eventually(CONVERGE, || async {
        let n = (host.metric("wcm_plugin_contract_v0_3__inspected_total", &inspected)).await;
        (n.ok()? >= 2.0).then_some(())
    })
    .await;
    ensure!(
        counted.is_some(),
        "no inspected_total:\n{}",
        host.metrics().await?
    );
    let text = host.metrics().await?;
    ensure!(text.contains("# HELP wcm_plugin_contract_v0_3__data_keys Data keys of the last"));
    ensure!(
        !text.contains("wcm_plugin_contract_v0_2"),
        "the 0.2 plugin declared none"
    );

    // A kind the 0.3 plugin declared `get` on but does not watch is read live.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "token"}, "stringData": {"user": "admin", "password": "x"},
    }))?;
    Api::<Secret>::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &secret)
        .await?;
    create(&api, "credentials", json!({"secret": "token"})).await?;
    create(&api, "no-credentials", json!({"secret": "missing"})).await?;
    for (name, note) in [
        ("credentials", "contract 0.3; secret token has 2 keys"),
        (
            "no-credentials",
            "contract 0.3; secret missing: not-found (status 404)",
        ),
    ] {
        let found = eventually(CONVERGE, || async {
            let events = recorded_events(&ns.client(), ns.name(), name, "SeenBy")
                .await
                .ok()?;
            events.into_iter().find_map(|e| {
                (e.reporting_controller.as_deref() == Some("contract-v0-3")).then_some(e.note)
            })
        })
        .await
        .flatten();
        assert_eq!(found.as_deref(), Some(note), "{name}");
    }

    // Create with a generated name, a merge patch guarded by the resourceVersion, and
    // an update of what was read, all as the plugin.
    create(&api, "maker", json!({"create": "made-"})).await?;
    create(&api, "updater", json!({"update": "please"})).await?;
    let made = eventually(CONVERGE, || async {
        let maker = api.get("maker").await.ok()?;
        maker.metadata.annotations?.get("wcm.test/created").cloned()
    })
    .await
    .context("maker was never annotated with what was created for it")?;
    ensure!(made.starts_with("made-") && made.len() == 10, "{made}");
    let created = api.get(&made).await?;
    ensure!(created.data.and_then(|d| d.get("from").cloned()).as_deref() == Some("maker"));
    let manager = (created
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter())
    .filter_map(|m| m.manager)
    .collect::<Vec<_>>();
    ensure!(manager == ["contract-v0-3"], "created by {manager:?}");
    let updated = eventually(CONVERGE, || async {
        let data = api.get("updater").await.ok()?.data?;
        (data.get("update").map(String::as_str) == Some("done")).then_some(())
    })
    .await;
    ensure!(updated.is_some(), "updater was never updated");

    // The finalizer holds the object until its "external record" is cleaned up.
    let records = "wcm-records";
    let namespaces: Api<Namespace> = Api::all(ns.client());
    if namespaces.get_opt(records).await?.is_none() {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": records}}))?;
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let record = format!("record-{}", ns.name());
    let record_api: Api<ConfigMap> = Api::namespaced(ns.client(), records);
    let external: ConfigMap = serde_json::from_value(json!({"metadata": {"name": record}}))?;
    record_api.create(&PostParams::default(), &external).await?;
    create(&api, "audited", json!({"record": record})).await?;
    let finalized = eventually(CONVERGE, || async {
        let cm = api.get("audited").await.ok()?;
        cm.metadata
            .finalizers?
            .contains(&"wcm.test/cleanup".to_string())
            .then_some(())
    })
    .await;
    finalized.context("the finalizer was never added")?;
    api.delete("audited", &Default::default()).await?;
    let released = eventually(CONVERGE, || async {
        let gone = api.get_opt("audited").await.ok()?.is_none();
        let cleaned = record_api.get_opt(&record).await.ok()?.is_none();
        (gone && cleaned).then_some(())
    })
    .await;
    released.context("the object was not cleaned up and released")?;

    // 0.2's delete (propagation only) still deletes.
    create(&api, "doomed", json!({"delete": "yes"})).await?;
    let gone = eventually(CONVERGE, || async {
        api.get_opt("doomed").await.ok()?.is_none().then_some(())
    })
    .await;
    gone.context("the 0.2 plugin's delete did not delete")?;
    Ok(())
}

#[support::test]
async fn terminal_errors_are_not_retried_and_preconditions_refuse_a_delete() -> Result<()> {
    let ns = TestNamespace::create("contract-terminal").await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (_dir, host) = host_with_both().await?;
    create(&api, "hopeless", json!({"fail": "terminal"})).await?;
    create(&api, "flaky", json!({"fail": "retry"})).await?;
    let terminal = [("controller", "contract-v0-3")];
    let name = "controller_runtime_terminal_reconcile_errors_total";
    let counted = eventually(CONVERGE, || async {
        (host.metric(name, &terminal).await.ok()? >= 1.0).then_some(())
    })
    .await;
    counted.with_context(|| {
        format!(
            "no terminal error counted; log:\n{}",
            host.logs().join("\n")
        )
    })?;
    host.wait_for_log(
        &[
            "reconcile failed terminally",
            "hopeless",
            "data.fail says terminal",
        ],
        CONVERGE,
    )
    .await?;
    // The 0.2 plugin's label is a change, which may queue the key once more; after
    // that a terminal error stays put while a plain one is retried with backoff.
    let labelled = eventually(CONVERGE, || async { seen_by(&api, "hopeless").await }).await;
    ensure!(labelled.is_some(), "the 0.2 plugin never labelled it");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = host.metric(name, &terminal).await?;
    let retried_before = host.lines_with(&["reconcile failed", "flaky"]).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        host.metric(name, &terminal).await?,
        settled,
        "a terminal error was retried"
    );
    let retried = host.lines_with(&["reconcile failed", "flaky", "data.fail says retry"]);
    ensure!(
        retried.len() > retried_before,
        "a plain error must be retried: {retried:?}"
    );
    // A change queues the key again.
    let touch = json!({"metadata": {"annotations": {"wcm.test/touched": "yes"}}});
    api.patch("hopeless", &PatchParams::default(), &Patch::Merge(&touch))
        .await?;
    let again = eventually(CONVERGE, || async {
        (host.metric(name, &terminal).await.ok()? > settled).then_some(())
    })
    .await;
    again.context("a change did not reconcile the key again")?;
    let v0_2 = host.lines_with(&["reconcile failed", "hopeless", "contract-v0-2"]);
    ensure!(
        v0_2.is_empty(),
        "the 0.2 plugin labels it without failing: {v0_2:?}"
    );

    // A delete whose uid precondition no longer holds is refused with 409.
    create(
        &api,
        "renamed",
        json!({"delete-uid": "0b5e7d2c-0000-4000-8000-000000000000"}),
    )
    .await?;
    let events = recorded_events(&ns.client(), ns.name(), "renamed", "DeleteRefused").await?;
    let note = events.first().and_then(|e| e.note.clone());
    assert_eq!(note.as_deref(), Some("conflict (status 409)"), "{events:?}");
    ensure!(
        api.get_opt("renamed").await?.is_some(),
        "deleted despite the precondition"
    );
    Ok(())
}
