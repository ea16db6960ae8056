//! The host side of each WIT capability, called directly on a `HostState` (no Wasm)
//! against the real control plane: cache reads, label patches, Events, and the typed
//! errors a plugin receives.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::support::imports::Cluster;
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{Value, json};
use wcm_control_plane::{ControlPlane, TestNamespace};
use wcm_core::bindings::v0_3::wcm::controller::cluster::{
    DeleteOptions, Event as EventArgs, Propagation,
};
use wcm_core::bindings::v0_3::wcm::controller::types::{
    Error as WitError, ErrorCode, EventType, Gvk, ObjectRef,
};
use wcm_core::budget::{Budget, PluginBudget};
use wcm_core::capabilities::ClusterAccess;
use wcm_core::contract::Verb;
use wcm_core::kube::informer::InformerRegistry;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::rights::Granted;
use wcm_core::runtime::HostState;

const PLUGIN: &str = "capability-test";

fn config_map_kind() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

fn config_map(ns: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: config_map_kind(),
        namespace: Some(ns.into()),
        name: name.into(),
    }
}

async fn create_config_map(client: &Client, ns: &str, name: &str, app: &str) -> Result<ConfigMap> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"},
    }))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    Ok(api.create(&PostParams::default(), &cm).await?)
}

/// A plugin's host state that watches ConfigMaps in `ns` and may patch them.
async fn state_for(ns: &str, client: Client) -> Result<HostState> {
    state_gated(ns, client, LeaderGate::always_open()).await
}

/// As [`state_for`], writing only while `leader` is open.
async fn state_gated(ns: &str, client: Client, leader: LeaderGate) -> Result<HostState> {
    state_of(PLUGIN, ns, client, leader).await
}

/// As [`state_for`], for a plugin named `plugin`, with every verb granted.
async fn state_of(plugin: &str, ns: &str, client: Client, leader: LeaderGate) -> Result<HostState> {
    support::access::config_map_plugin(plugin, ns, client, leader, Budget::default()).await
}

/// The default budget of `plugin`, reporting to metrics of its own.
fn budget(plugin: &str) -> Arc<PluginBudget> {
    Arc::new(PluginBudget::new(
        plugin,
        Budget::default(),
        Default::default(),
    ))
}

#[support::test]
async fn get_and_list_read_the_cache_with_selectors_and_typed_errors() -> Result<()> {
    let ns = TestNamespace::create("cap-read").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    create_config_map(&ns.client(), ns.name(), "api", "api").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;

    let json = state
        .get(config_map(ns.name(), "web"))
        .await
        .map_err(anyhow_wit)?;
    let cm: ConfigMap = serde_json::from_str(&json)?;
    assert_eq!(
        cm.data.context("data")?.get("k").map(String::as_str),
        Some("v")
    );
    assert!(
        !json.contains("managedFields"),
        "cache must strip managedFields"
    );

    let web = state
        .list(
            config_map_kind(),
            Some(ns.name().into()),
            Some("app=web".into()),
        )
        .await;
    assert_eq!(web.map_err(anyhow_wit)?.len(), 1);
    let both = state
        .list(config_map_kind(), None, Some("app in (web,api)".into()))
        .await;
    assert_eq!(both.map_err(anyhow_wit)?.len(), 2);

    assert_wit_error(
        state.get(config_map(ns.name(), "missing")).await,
        "not-found",
        "missing",
    );
    let secret = ObjectRef {
        kind: Gvk {
            kind: "Secret".into(),
            ..config_map_kind()
        },
        ..config_map(ns.name(), "x")
    };
    assert_wit_error(
        state.get(secret).await,
        "invalid",
        "does not watch v1/Secret",
    );
    assert_wit_error(
        state
            .list(config_map_kind(), None, Some("app in web".into()))
            .await,
        "invalid",
        "invalid label selector",
    );
    Ok(())
}

/// `count` and `list-first` (0.3.1) see what `list` sees: the count of a selector,
/// the first objects by name, the same errors, and the result limit on what is
/// returned, not on what is matched.
#[support::test]
async fn count_and_list_first_answer_as_list_without_copying_the_rest() -> Result<()> {
    let ns = TestNamespace::create("cap-count").await?;
    for name in ["batch-d", "batch-b", "batch-e", "batch-a", "batch-c"] {
        create_config_map(&ns.client(), ns.name(), name, "batch").await?;
    }
    create_config_map(&ns.client(), ns.name(), "other", "other").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    let batch = || Some("app=batch".to_string());
    let here = || Some(ns.name().to_string());

    assert_eq!(
        state
            .count(config_map_kind(), here(), batch())
            .await
            .map_err(anyhow_wit)?,
        5
    );
    let all = state
        .list(config_map_kind(), here(), None)
        .await
        .map_err(anyhow_wit)?;
    let counted = state
        .count(config_map_kind(), None, None)
        .await
        .map_err(anyhow_wit)?;
    assert_eq!(counted, all.len() as u64, "count agrees with list");

    let first = state
        .list_first(config_map_kind(), here(), batch(), 2)
        .await;
    assert_eq!(names(&first.map_err(anyhow_wit)?)?, ["batch-a", "batch-b"]);
    let every = state
        .list_first(config_map_kind(), None, batch(), 1_000)
        .await;
    let every = names(&every.map_err(anyhow_wit)?)?;
    assert_eq!(
        every,
        ["batch-a", "batch-b", "batch-c", "batch-d", "batch-e"]
    );
    let none = state.list_first(config_map_kind(), None, batch(), 0).await;
    assert!(none.map_err(anyhow_wit)?.is_empty());

    let secrets = Gvk {
        kind: "Secret".into(),
        ..config_map_kind()
    };
    assert_wit_error(
        state.count(secrets, None, None).await,
        "invalid",
        "count v1/Secret in all namespaces: plugin capability-test does not watch",
    );
    assert_wit_error(
        state
            .list_first(config_map_kind(), None, Some("app in web".into()), 1)
            .await,
        "invalid",
        "list-first v1/ConfigMap in all namespaces: invalid label selector",
    );

    // A result limit of two and a half objects: two fit, five do not.
    let one = state
        .list_first(config_map_kind(), None, batch(), 1)
        .await
        .map_err(anyhow_wit)?;
    let mut limit = Budget::default();
    limit.api.max_result_bytes = one[0].len() * 5 / 2;
    let leader = LeaderGate::always_open();
    let mut small =
        support::access::config_map_plugin(PLUGIN, ns.name(), ns.client(), leader, limit).await?;
    let two = small.list_first(config_map_kind(), None, batch(), 2).await;
    assert_eq!(two.map_err(anyhow_wit)?.len(), 2);
    assert_wit_error(
        small.list(config_map_kind(), None, batch()).await,
        "invalid",
        "more than plugin capability-test's limit",
    );
    assert_eq!(
        small
            .count(config_map_kind(), None, batch())
            .await
            .map_err(anyhow_wit)?,
        5
    );
    Ok(())
}

/// The names of listed objects, in order.
fn names(listed: &[String]) -> Result<Vec<String>> {
    listed
        .iter()
        .map(|json| {
            let cm: ConfigMap = serde_json::from_str(json)?;
            cm.metadata.name.context("name")
        })
        .collect()
}

#[support::test]
async fn patch_labels_sets_and_removes_as_the_plugins_field_manager() -> Result<()> {
    let ns = TestNamespace::create("cap-patch").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    let set = vec![("team".to_string(), "blue".to_string())];
    state
        .patch_labels(config_map(ns.name(), "web"), set, vec!["app".into()])
        .await
        .map_err(anyhow_wit)?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let cm = api.get("web").await?;
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("blue"));
    assert!(
        !labels.contains_key("app"),
        "removed label still there: {labels:?}"
    );
    let managers: Vec<_> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.iter().any(|m| m == PLUGIN),
        "field managers: {managers:?}"
    );

    let bad = vec![("team".to_string(), "not valid!".to_string())];
    assert_wit_error(
        state
            .patch_labels(config_map(ns.name(), "web"), bad, vec![])
            .await,
        "invalid",
        "invalid value \"not valid!\" for label \"team\"",
    );
    assert_eq!(
        api.get("web").await?.metadata.resource_version,
        cm.metadata.resource_version
    );

    let pod = ObjectRef {
        kind: Gvk {
            kind: "Pod".into(),
            ..config_map_kind()
        },
        ..config_map(ns.name(), "p")
    };
    assert_wit_error(
        state
            .patch_labels(pod, vec![("a".into(), "b".into())], vec![])
            .await,
        "forbidden",
        "did not declare the patch permission on v1/Pod",
    );
    Ok(())
}

#[support::test]
async fn an_api_server_refusal_reaches_the_plugin_as_forbidden() -> Result<()> {
    let ns = TestNamespace::create("cap-rbac").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    // The plugin declared the permission, but its writes go out with an identity that
    // RBAC grants nothing: the API server's 403 reaches the plugin as `forbidden`.
    let restricted = ControlPlane::shared()?.restricted_client().await?;
    let registry = Arc::new(InformerRegistry::new(
        restricted.clone(),
        Default::default(),
    ));
    let grants = HashMap::from([(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        HashSet::from([Verb::Patch]),
    )]);
    let granted = Arc::new(Granted::everything());
    let access = ClusterAccess::live(
        budget(PLUGIN),
        "test-host",
        registry,
        restricted,
        (vec![], granted.clone()),
        grants,
        LeaderGate::always_open(),
    );
    let mut state = HostState::for_reconcile(Arc::new(access), "key".into(), 64 << 20);
    assert_wit_error(
        state
            .patch_labels(
                config_map(ns.name(), "web"),
                vec![("a".into(), "b".into())],
                vec![],
            )
            .await,
        "forbidden",
        "wcm-restricted",
    );
    // The refusal asked for a review of the plugin's rights at once, so its state
    // names the rule within a second, not at the next periodic review.
    let asked = tokio::time::timeout(Duration::from_secs(5), granted.review_asked()).await;
    ensure!(asked.is_ok(), "a 403 did not ask for a review");
    Ok(())
}

#[support::test]
async fn record_event_reports_as_the_plugin_and_folds_repeats_into_one_event() -> Result<()> {
    let ns = TestNamespace::create("cap-event").await?;
    let cm = create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    for _ in 0..2 {
        state
            .record_event(event_args(
                config_map(ns.name(), "web"),
                EventType::Warning,
                "Checked".into(),
                "looked at it".into(),
            ))
            .await
            .map_err(anyhow_wit)?;
    }
    let events: Api<Event> = Api::namespaced(ns.client(), ns.name());
    let found = events.list(&ListParams::default()).await?.items;
    assert_eq!(found.len(), 1, "repeats must be folded: {found:?}");
    let event = &found[0];
    assert_eq!(event.reporting_controller.as_deref(), Some(PLUGIN));
    assert_eq!(event.reporting_instance.as_deref(), Some("test-host"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note.as_deref(), Some("looked at it"));
    assert_eq!(event.series.as_ref().map(|s| s.count), Some(2));
    let regarding = event.regarding.as_ref().context("regarding")?;
    assert_eq!(regarding.uid, cm.metadata.uid, "the cache supplies the uid");

    let long_reason = "R".repeat(129);
    assert_wit_error(
        state
            .record_event(event_args(
                config_map(ns.name(), "web"),
                EventType::Normal,
                long_reason,
                String::new(),
            ))
            .await,
        "invalid",
        "1 to 128 characters",
    );
    Ok(())
}

#[support::test]
async fn a_repeat_of_an_event_the_api_server_no_longer_has_is_recorded_anew() -> Result<()> {
    let ns = TestNamespace::create("cap-event-gone").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    let checked = || {
        event_args(
            config_map(ns.name(), "web"),
            EventType::Normal,
            "Checked".into(),
            "looked at it".into(),
        )
    };
    state.record_event(checked()).await.map_err(anyhow_wit)?;
    // The Event expires (the API server's --event-ttl) or someone deletes it.
    let events: Api<Event> = Api::namespaced(ns.client(), ns.name());
    events
        .delete_collection(&Default::default(), &ListParams::default())
        .await?;
    state.record_event(checked()).await.map_err(anyhow_wit)?;
    let found = events.list(&ListParams::default()).await?.items;
    assert_eq!(found.len(), 1, "the repeat is recorded: {found:?}");
    assert_eq!(found[0].note.as_deref(), Some("looked at it"));
    assert_eq!(
        found[0].series, None,
        "a new Event, not a series of a lost one"
    );
    Ok(())
}

#[support::test]
async fn a_replica_that_stopped_leading_writes_nothing_and_says_why() -> Result<()> {
    let ns = TestNamespace::create("cap-leader").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let (leading, gate) = tokio::sync::watch::channel(true);
    let mut state = state_gated(ns.name(), ns.client(), LeaderGate::following(gate)).await?;
    let set = |v: &str| vec![("phase".to_string(), v.to_string())];
    state
        .patch_labels(config_map(ns.name(), "web"), set("leading"), vec![])
        .await
        .map_err(anyhow_wit)?;
    leading.send_replace(false);
    assert_wit_error(
        state
            .patch_labels(config_map(ns.name(), "web"), set("stale"), vec![])
            .await,
        "unavailable",
        "this replica does not lead (any more); nothing was written",
    );
    assert_wit_error(
        state
            .record_event(event_args(
                config_map(ns.name(), "web"),
                EventType::Normal,
                "Stale".into(),
                String::new(),
            ))
            .await,
        "unavailable",
        "record-event Stale",
    );
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let labels = api.get("web").await?.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("phase").map(String::as_str), Some("leading"));
    let events: Api<Event> = Api::namespaced(ns.client(), ns.name());
    assert!(events.list(&ListParams::default()).await?.items.is_empty());
    Ok(())
}

#[support::test]
async fn two_plugins_applying_one_field_conflict_unless_the_second_forces() -> Result<()> {
    let ns = TestNamespace::create("cap-apply").await?;
    let n = ns.name();
    let gate = LeaderGate::always_open;
    let mut first = state_of("colour-a", n, ns.client(), gate()).await?;
    let mut second = state_of("colour-b", n, ns.client(), gate()).await?;
    let colour = |c: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shared", "namespace": n}, "data": {"colour": c}})
        .to_string()
    };
    let stored = first
        .apply(colour("red"), false)
        .await
        .map_err(anyhow_wit)?;
    let stored: ConfigMap = serde_json::from_str(&stored)?;
    assert_eq!(
        stored
            .data
            .context("data")?
            .get("colour")
            .map(String::as_str),
        Some("red")
    );
    assert_wit_error(
        second.apply(colour("blue"), false).await,
        "conflict",
        "conflict with \"colour-a\": .data.colour",
    );
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), n);
    let data = api.get("shared").await?.data.unwrap_or_default();
    assert_eq!(
        data.get("colour").map(String::as_str),
        Some("red"),
        "flipped"
    );
    second
        .apply(colour("blue"), true)
        .await
        .map_err(anyhow_wit)?;
    let data = api.get("shared").await?.data.unwrap_or_default();
    assert_eq!(data.get("colour").map(String::as_str), Some("blue"));

    let shared = config_map(n, "shared");
    second
        .delete(shared.clone(), background())
        .await
        .map_err(anyhow_wit)?;
    assert!(api.get_opt("shared").await?.is_none());
    assert_wit_error(
        second.delete(shared, background()).await,
        "not-found",
        "shared",
    );
    let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    assert_wit_error(
        first.apply(nameless.to_string(), false).await,
        "invalid",
        "apply: the object has no metadata.name",
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
    assert_wit_error(
        first.apply(node.to_string(), true).await,
        "forbidden",
        "plugin colour-a did not declare the apply permission on v1/Node",
    );
    Ok(())
}

#[support::test]
async fn errors_carry_the_status_and_causes_and_deletes_check_their_preconditions() -> Result<()> {
    let ns = TestNamespace::create("cap-precond").await?;
    let n = ns.name();
    let gate = LeaderGate::always_open;
    let mut first = state_of("owner-a", n, ns.client(), gate()).await?;
    let mut second = state_of("owner-b", n, ns.client(), gate()).await?;
    let object = |c: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kept", "namespace": n}, "data": {"colour": c}})
        .to_string()
    };
    let stored = first
        .apply(object("red"), false)
        .await
        .map_err(anyhow_wit)?;
    let stored: ConfigMap = serde_json::from_str(&stored)?;
    let conflict = second
        .apply(object("blue"), false)
        .await
        .expect_err("conflict");
    assert_eq!(conflict.code, ErrorCode::Conflict);
    assert_eq!(conflict.status, Some(409));
    let cause = conflict.causes.first().context("a cause per field")?;
    assert_eq!(cause.field, ".data.colour");
    assert_eq!(cause.manager.as_deref(), Some("owner-a"), "{cause:?}");

    let kept = config_map(n, "kept");
    let precondition = |uid: Option<String>, rv: Option<String>| DeleteOptions {
        propagation: Propagation::Background,
        uid,
        resource_version: rv,
    };
    let wrong_uid = precondition(Some("0b5e7d2c-0000-4000-8000-000000000000".into()), None);
    let refused = first
        .delete(kept.clone(), wrong_uid)
        .await
        .expect_err("stale uid");
    assert_eq!(
        (refused.code, refused.status),
        (ErrorCode::Conflict, Some(409)),
        "{refused:?}"
    );
    assert!(
        refused.message.contains("the UID in the precondition")
            && refused.message.contains("does not match"),
        "{}",
        refused.message
    );
    let stale_rv = precondition(None, Some("1".into()));
    let refused = first
        .delete(kept.clone(), stale_rv)
        .await
        .expect_err("stale rv");
    assert_eq!(refused.code, ErrorCode::Conflict, "{refused:?}");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), n);
    assert!(
        api.get_opt("kept").await?.is_some(),
        "refused deletes delete nothing"
    );
    let current = precondition(stored.metadata.uid.clone(), None);
    first.delete(kept, current).await.map_err(anyhow_wit)?;
    assert!(api.get_opt("kept").await?.is_none());
    Ok(())
}

#[support::test]
async fn an_event_names_its_action_and_related_object() -> Result<()> {
    let ns = TestNamespace::create("cap-related").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let settings = create_config_map(&ns.client(), ns.name(), "settings", "web").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    let mut event = event_args(
        config_map(ns.name(), "web"),
        EventType::Normal,
        "Configured".into(),
        "took the settings".into(),
    );
    event.action = "ReadSettings".into();
    event.related = Some(config_map(ns.name(), "settings"));
    state
        .record_event(event.clone())
        .await
        .map_err(anyhow_wit)?;
    let events: Api<Event> = Api::namespaced(ns.client(), ns.name());
    let found = events.list(&ListParams::default()).await?.items;
    let recorded = found.first().context("one Event")?;
    assert_eq!(recorded.action.as_deref(), Some("ReadSettings"));
    let related = recorded.related.as_ref().context("related")?;
    assert_eq!(related.name.as_deref(), Some("settings"));
    assert_eq!(
        related.uid, settings.metadata.uid,
        "the cache supplies the uid"
    );

    event.action = "Read Settings\n".into();
    assert_wit_error(
        state.record_event(event.clone()).await,
        "invalid",
        "event action",
    );
    event.action = String::new();
    event.related = Some(ObjectRef {
        kind: Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
        },
        namespace: Some(ns.name().into()),
        name: "token".into(),
    });
    assert_wit_error(
        state.record_event(event).await,
        "forbidden",
        "(related v1/Secret",
    );
    Ok(())
}

#[support::test]
async fn a_kind_declared_get_but_not_watched_is_read_live() -> Result<()> {
    let ns = TestNamespace::create("cap-live").await?;
    create_config_map(&ns.client(), ns.name(), "web", "web").await?;
    let client = ns.client();
    let registry = Arc::new(InformerRegistry::new(client.clone(), Default::default()));
    let grants = HashMap::from([(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        HashSet::from([Verb::Get]),
    )]);
    let access = ClusterAccess::live(
        budget(PLUGIN),
        "test-host",
        registry,
        client,
        (vec![], Arc::new(Granted::everything())),
        grants,
        LeaderGate::always_open(),
    );
    let mut state = HostState::for_reconcile(Arc::new(access), "key".into(), 64 << 20);
    let json = state
        .get(config_map(ns.name(), "web"))
        .await
        .map_err(anyhow_wit)?;
    let read: ConfigMap = serde_json::from_str(&json)?;
    assert_eq!(read.metadata.name.as_deref(), Some("web"));
    assert!(
        read.metadata.managed_fields.is_none(),
        "managedFields are stripped"
    );
    let missing = state
        .get(config_map(ns.name(), "gone"))
        .await
        .expect_err("missing");
    assert_eq!(
        (missing.code, missing.status),
        (ErrorCode::NotFound, Some(404))
    );
    let pods = ObjectRef {
        kind: Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
        },
        namespace: Some(ns.name().into()),
        name: "web".into(),
    };
    assert_wit_error(state.get(pods).await, "invalid", "declare `get` on it");
    Ok(())
}

#[support::test]
async fn the_cluster_is_unavailable_during_register() -> Result<()> {
    let mut state = HostState::for_register(PLUGIN, 64 << 20);
    assert_wit_error(
        state.get(config_map("ns", "x")).await,
        "unavailable",
        "register()",
    );
    Ok(())
}

/// Asserts that `result` failed with the contract's error `case` and a message holding
/// `needle`.
fn assert_wit_error<T: std::fmt::Debug>(result: Result<T, WitError>, case: &str, needle: &str) {
    let Err(e) = &result else {
        panic!("expected {case}, got {result:?}");
    };
    let found = match e.code {
        ErrorCode::NotFound => "not-found",
        ErrorCode::AlreadyExists => "already-exists",
        ErrorCode::Forbidden => "forbidden",
        ErrorCode::Conflict => "conflict",
        ErrorCode::Invalid => "invalid",
        ErrorCode::Unavailable => "unavailable",
        ErrorCode::Other => "other",
    };
    assert_eq!(found, case, "expected {case}, got {result:?}");
    assert!(e.message.contains(needle), "{}", e.message);
}

fn anyhow_wit(e: WitError) -> anyhow::Error {
    anyhow::anyhow!("{e:?}")
}

/// A normal or warning Event about `regarding` with no action or related object.
fn event_args(regarding: ObjectRef, type_: EventType, reason: String, note: String) -> EventArgs {
    EventArgs {
        regarding,
        related: None,
        type_,
        reason,
        action: String::new(),
        note,
    }
}

/// An unconditional background delete.
fn background() -> DeleteOptions {
    DeleteOptions {
        propagation: Propagation::Background,
        uid: None,
        resource_version: None,
    }
}

#[support::test]
async fn a_plugins_own_metrics_are_exported_with_its_label_and_bounded_in_series() -> Result<()> {
    use crate::support::imports::Metrics;
    use wcm_core::contract::{MetricDeclaration, MetricKind};
    use wcm_core::metrics::plugin::PluginMetrics;

    let client = ControlPlane::shared()?.admin_client().await?;
    let host_metrics = Arc::new(wcm_core::metrics::Metrics::new());
    let mut limits = Budget::default();
    limits.metrics.max_series = 1;
    let budget = Arc::new(PluginBudget::new(PLUGIN, limits, host_metrics.clone()));
    let declared = [MetricDeclaration {
        name: "widgets".into(),
        help: "Widgets seen".into(),
        kind: MetricKind::Counter,
        labels: vec!["state".into()],
        buckets: vec![],
    }];
    let own = Arc::new(PluginMetrics::new(PLUGIN, &declared, 1));
    host_metrics.plugin_metrics.insert(own.clone());
    let registry = Arc::new(InformerRegistry::new(client.clone(), Default::default()));
    let access = ClusterAccess::live(
        budget,
        "test-host",
        registry,
        client,
        (vec![], Arc::new(Granted::everything())),
        HashMap::new(),
        LeaderGate::always_open(),
    )
    .with_metrics(own);
    let mut state = HostState::for_reconcile(Arc::new(access), "key".into(), 64 << 20);
    let widgets = |state: &str| ("widgets".to_string(), vec![state.to_string()], 2.0);
    let (name, labels, value) = widgets("ready");
    (Metrics::add(&mut state, name, labels, value).await).map_err(anyhow_wit)?;
    let (name, labels, value) = widgets("broken");
    let refused = Metrics::add(&mut state, name, labels, value).await;
    assert_wit_error(refused, "invalid", "--max-metric-series-per-plugin");
    let (name, labels, value) = widgets("ready");
    (Metrics::add(&mut state, name, labels, value).await).map_err(anyhow_wit)?;
    let text = host_metrics.encode();
    for line in [
        r#"wcm_plugin_capability_test__widgets_total{plugin="capability-test",state="ready"} 4.0"#,
        r#"wcm_plugin_limit_hits_total{plugin="capability-test",limit="metric_series"} 1"#,
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    host_metrics.plugin_metrics.remove(PLUGIN);
    assert!(
        !host_metrics
            .encode()
            .contains("wcm_plugin_capability_test_")
    );
    Ok(())
}

#[support::test]
async fn create_patch_and_update_write_as_the_plugin_and_keep_their_preconditions() -> Result<()> {
    use wcm_core::bindings::v0_3::wcm::controller::cluster::PatchType;
    let ns = TestNamespace::create("cap-writes").await?;
    let mut state = state_for(ns.name(), ns.client()).await?;
    let made = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "made-", "namespace": ns.name()}, "data": {"a": "1"}});
    let created: Value =
        serde_json::from_str(&(state.create(made.to_string()).await).map_err(anyhow_wit)?)?;
    let name = created["metadata"]["name"]
        .as_str()
        .context("name")?
        .to_string();
    assert!(
        name.starts_with("made-") && name.len() == "made-".len() + 5,
        "{name}"
    );
    assert!(
        created["metadata"].get("managedFields").is_none(),
        "{created}"
    );
    let version = created["metadata"]["resourceVersion"].clone();
    let again = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns.name()}});
    assert_wit_error(
        state.create(again.to_string()).await,
        "already-exists",
        "already exists",
    );

    // A merge patch naming an old resourceVersion is refused; one without is applied.
    let target = config_map(ns.name(), &name);
    let merge = |patch: Value| (target.clone(), PatchType::Merge, patch.to_string(), None);
    let (obj, kind, body, sub) = merge(json!({"data": {"b": "2"}}));
    let patched = state
        .patch(obj, kind, body, sub)
        .await
        .map_err(anyhow_wit)?;
    let patched: Value = serde_json::from_str(&patched)?;
    assert_eq!(patched["data"], json!({"a": "1", "b": "2"}));
    let stale = json!({"metadata": {"resourceVersion": version}, "data": {"c": "3"}});
    let (obj, kind, body, sub) = merge(stale);
    assert_wit_error(
        state.patch(obj, kind, body, sub).await,
        "conflict",
        "modified",
    );

    // A JSON patch whose `test` fails changes nothing (422); one that holds applies.
    let json_patch = |ops: Value| (target.clone(), PatchType::Json, ops.to_string(), None);
    let failing = json!([{"op": "test", "path": "/data/a", "value": "9"},
        {"op": "remove", "path": "/data/a"}]);
    let (obj, kind, body, sub) = json_patch(failing);
    assert_wit_error(state.patch(obj, kind, body, sub).await, "invalid", "422");
    let holding = json!([{"op": "test", "path": "/data/a", "value": "1"},
        {"op": "remove", "path": "/data/a"}]);
    let (obj, kind, body, sub) = json_patch(holding);
    state
        .patch(obj, kind, body, sub)
        .await
        .map_err(anyhow_wit)?;

    // An update of what was read at an old version conflicts; of the current one, not.
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut current = serde_json::to_value(cms.get(&name).await?)?;
    let mut old = created.clone();
    old["data"] = json!({"d": "4"});
    assert_wit_error(state.update(old.to_string()).await, "conflict", "modified");
    current["data"] = json!({"d": "4"});
    (state.update(current.to_string()).await).map_err(anyhow_wit)?;
    let stored = cms.get(&name).await?;
    assert_eq!(
        stored.data,
        Some([("d".to_string(), "4".to_string())].into())
    );
    let managers: Vec<_> = (stored
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter())
    .filter_map(|m| m.manager)
    .collect();
    assert!(managers.iter().all(|m| m == PLUGIN), "{managers:?}");

    // A subresource no plugin may patch, and one this plugin did not declare.
    let (obj, kind, body, _) = merge(json!({}));
    let exec = state.patch(obj, kind, body, Some("exec".into())).await;
    assert_wit_error(exec, "invalid", "not one a plugin may patch");
    let (obj, kind, body, _) = merge(json!({"spec": {"replicas": 2}}));
    let scale = state.patch(obj, kind, body, Some("scale".into())).await;
    assert_wit_error(scale, "forbidden", "patch/scale");
    Ok(())
}

#[support::test]
async fn a_lookup_of_a_kind_the_api_server_does_not_serve_is_a_counted_request_made_once()
-> Result<()> {
    let ns = TestNamespace::create("cap-bogus").await?;
    let client = ns.client();
    let metrics: Arc<wcm_core::metrics::Metrics> = Default::default();
    let bogus = GroupVersionKind::gvk("bogus.example.com", "v1", "Thing");
    let access = ClusterAccess::live(
        Arc::new(PluginBudget::new(
            PLUGIN,
            Budget::default(),
            metrics.clone(),
        )),
        "test-host",
        Arc::new(InformerRegistry::new(client.clone(), Default::default())),
        client,
        (vec![], Arc::new(Granted::everything())),
        HashMap::from([(bogus, HashSet::from([Verb::Patch]))]),
        LeaderGate::always_open(),
    );
    let mut state = HostState::for_reconcile(Arc::new(access), "key".into(), 64 << 20);
    let thing = ObjectRef {
        kind: Gvk {
            group: "bogus.example.com".into(),
            version: "v1".into(),
            kind: "Thing".into(),
        },
        namespace: Some(ns.name().into()),
        name: "x".into(),
    };
    // A plugin looping over a kind it declared that does not exist.
    for _ in 0..50 {
        let patched = state
            .patch_finalizers(thing.clone(), vec!["example.com/f".into()], vec![])
            .await;
        assert_wit_error(patched, "invalid", "not served by the API server");
    }
    let text = metrics.encode();
    let line = (text.lines())
        .find(|l| l.starts_with("wcm_plugin_api_requests_total") && l.contains(PLUGIN))
        .context("no request counted")?;
    ensure!(line.ends_with(" 1"), "one lookup for fifty calls: {line}");
    Ok(())
}
