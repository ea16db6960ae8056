//! Every capability called with arbitrary arguments — hostile strings of any length
//! and alphabet, kinds, namespaces, label sets, JSON and not-JSON — never panics the
//! host, always answers with a message, and never sends a name a URL would
//! misread. Runs against the real control plane (the few well-formed calls reach it).

use crate::support;

use std::sync::OnceLock;

use crate::support::imports::Cluster;
use crate::support::imports::Metrics;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use wcm_control_plane::TestNamespace;
use wcm_core::bindings::v0_3::wcm::controller::cluster::{
    DeleteOptions, Event, PatchType, Propagation,
};
use wcm_core::bindings::v0_3::wcm::controller::log::{Host as Log, Level};
use wcm_core::bindings::v0_3::wcm::controller::types::{
    Error as WitError, ErrorCode, EventType, Gvk, ObjectRef,
};
use wcm_core::budget::Budget;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::runtime::HostState;

/// Strings a hostile plugin would try: anything, near-valid names, URL syntax,
/// control characters, and lengths around the limits.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?",
        "[a-z]{1,8}[?#/%&= ][a-z=&]{0,12}",
        "[\\x00-\\x1f\\x7f]{1,4}[a-z]{0,4}",
        Just(String::new()),
        Just("..".to_string()),
        "[a-z]{250,300}",
        "v1|apps|ConfigMap|Pod|Secret",
    ]
}

fn gvk() -> impl Strategy<Value = Gvk> {
    prop_oneof![
        Just(("".to_string(), "v1".to_string(), "ConfigMap".to_string())),
        (hostile_string(), hostile_string(), hostile_string()),
    ]
    .prop_map(|(group, version, kind)| Gvk {
        group,
        version,
        kind,
    })
}

fn object_ref(ns: String) -> impl Strategy<Value = ObjectRef> {
    let namespace = prop_oneof![Just(Some(ns)), Just(None), hostile_string().prop_map(Some)];
    (gvk(), namespace, hostile_string()).prop_map(|(kind, namespace, name)| ObjectRef {
        kind,
        namespace,
        name,
    })
}

fn json_or_not() -> impl Strategy<Value = String> {
    let object = (
        hostile_string(),
        hostile_string(),
        hostile_string(),
        hostile_string(),
    )
        .prop_map(|(api_version, kind, name, ns)| {
            serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": ns}, "data": {"k": name}})
            .to_string()
        });
    prop_oneof![
        any::<String>(),
        object,
        Just("{}".to_string()),
        Just("[]".into())
    ]
}

/// One arbitrary call of every capability.
#[derive(Debug, Clone)]
struct Calls {
    target: ObjectRef,
    kind: Gvk,
    namespace: Option<String>,
    selector: Option<String>,
    set: Vec<(String, String)>,
    remove: Vec<String>,
    reason: String,
    note: String,
    object: String,
    force: bool,
    propagation: u8,
}

fn calls(ns: String) -> impl Strategy<Value = Calls> {
    let strings = || proptest::collection::vec(hostile_string(), 0..4);
    (
        (
            object_ref(ns.clone()),
            gvk(),
            proptest::option::of(hostile_string()),
        ),
        (proptest::option::of(hostile_string()), strings(), strings()),
        (
            hostile_string(),
            hostile_string(),
            json_or_not(),
            any::<bool>(),
            0u8..3,
        ),
    )
        .prop_map(
            move |((target, kind, namespace), (selector, keys, remove), rest)| {
                let set = keys.into_iter().map(|k| (k.clone(), k)).collect();
                let (reason, note, object, force, propagation) = rest;
                Calls {
                    target,
                    kind,
                    namespace,
                    selector,
                    set,
                    remove,
                    reason,
                    note,
                    object,
                    force,
                    propagation,
                }
            },
        )
}

/// The message of an error, which must never be empty.
fn message(error: &WitError) -> &str {
    &error.message
}

fn check<T>(op: &str, result: &Result<T, WitError>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        prop_assert!(!message(e).is_empty(), "{op}: an error without a message");
    }
    Ok(())
}

async fn call_everything(state: &mut HostState, c: Calls) -> Result<(), TestCaseError> {
    let name_is_url_safe = !c.target.name.is_empty()
        && c.target.name.len() <= 253
        && c.target.name != "."
        && c.target.name != ".."
        && c.target
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-._:@~".contains(ch));
    check("get", &state.get(c.target.clone()).await)?;
    let listed = state
        .list(c.kind.clone(), c.namespace.clone(), c.selector.clone())
        .await;
    check("list", &listed)?;
    let patched = state
        .patch_labels(c.target.clone(), c.set.clone(), c.remove.clone())
        .await;
    check("patch-labels", &patched)?;
    if !name_is_url_safe {
        prop_assert!(
            matches!(&patched, Err(e) if e.code == ErrorCode::Invalid),
            "name {:?} was not refused: {patched:?}",
            c.target.name
        );
    }
    let event = state.record_event(Event {
        regarding: c.target.clone(),
        related: Some(c.target.clone()),
        type_: EventType::Warning,
        reason: c.reason.clone(),
        action: c.reason.clone(),
        note: c.note.clone(),
    });
    check("record-event", &event.await)?;
    check("apply", &state.apply(c.object.clone(), c.force).await)?;
    check("create", &state.create(c.object.clone()).await)?;
    check("update", &state.update(c.object.clone()).await)?;
    let kind = [PatchType::Merge, PatchType::Json][usize::from(c.force)];
    let subresource = Some(c.reason.clone()).filter(|_| c.propagation == 2);
    let patched = state
        .patch(c.target.clone(), kind, c.object.clone(), subresource)
        .await;
    check("patch", &patched)?;
    check(
        "patch-status",
        &state.patch_status(c.target.clone(), c.object.clone()).await,
    )?;
    let propagation = [
        Propagation::Background,
        Propagation::Foreground,
        Propagation::Orphan,
    ];
    let options = DeleteOptions {
        propagation: propagation[usize::from(c.propagation)],
        uid: Some(c.reason.clone()),
        resource_version: Some(c.note.clone()),
    };
    let deleted = state.delete(c.target.clone(), options).await;
    check("delete", &deleted)?;
    let value = [f64::NAN, -1.0, f64::MAX][usize::from(c.propagation)];
    let updated = Metrics::add(state, c.reason.clone(), c.remove.clone(), value).await;
    check("metrics.add", &updated)?;
    let observed = Metrics::observe(state, c.note.clone(), c.remove.clone(), value).await;
    check("metrics.observe", &observed)?;
    let fields = vec![(c.reason.clone(), c.note.clone())];
    Log::log(state, Level::Error, c.note, fields).await;
    Ok(())
}

#[support::test]
fn every_capability_survives_arbitrary_arguments() {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| tokio::runtime::Runtime::new().expect("tokio"));
    let (ns, state) = runtime.block_on(async {
        let ns = TestNamespace::create("cap-props").await.expect("namespace");
        // As fast as the API server takes it: the budget is not under test here.
        let mut budget = Budget::default();
        (budget.api.qps, budget.api.burst) = (1_000.0, 1_000);
        let state = support::access::config_map_plugin(
            "property-test",
            ns.name(),
            ns.client(),
            LeaderGate::always_open(),
            budget,
        )
        .await
        .expect("state");
        (ns, state)
    });
    let mut runner = TestRunner::new(Config {
        cases: 256,
        ..Config::default()
    });
    let strategy = calls(ns.name().to_string());
    let state = std::sync::Mutex::new(state);
    let outcome = runner.run(&strategy, |c| {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        runtime.block_on(call_everything(&mut state, c))
    });
    runtime.block_on(async move { drop(ns) });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
