//! A host fault — the host failing at its own part of a plugin's call — traps that
//! call instead of reaching the plugin as an error, names the plugin, the import and
//! the cause, is counted as the host's (`result="host_fault"`, `cause="host_fault"`),
//! never as the plugin's crash, and costs one reconcile: the process and the plugin's
//! next reconcile go on. Two faults: a panic inside the backend (a host bug, caught at
//! the import) reached by the real pod-counter plugin, and a backend's own
//! `HostFault` answer to a write. Offline: the backend is this file's.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use futures::future::BoxFuture;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use wcm_core::bindings::v0_3::wcm::controller::cluster::Host as Cluster;
use wcm_core::bindings::v0_3::wcm::controller::types::{Gvk, ObjectRef};
use wcm_core::budget::{Budget, PluginBudget};
use wcm_core::capabilities::{
    Backend, CapabilityError, Checked, ClusterAccess, Declared, Op, Selection, Target, Write,
};
use wcm_core::config::Limits;
use wcm_core::contract::{DeleteOptions, EventRecord, Verb};
use wcm_core::keys::ReconcileKey;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::Metrics;
use wcm_core::rights::Granted;
use wcm_core::runtime::{Blame, CallError, HostFault, HostState, ReusedInstance, Runtime};

const PLUGIN: &str = "faulty";

/// A cluster whose reads hit a bug (they panic) and whose writes fail at the host's
/// own part (they answer with a host fault), when `broken`; an empty cluster else.
#[derive(Debug)]
struct Broken {
    broken: bool,
}

/// What the broken backend answers to a request this test does not make.
fn not_in_this_test<T: Send + 'static>(op: &Op) -> BoxFuture<'_, Result<T, CapabilityError>> {
    Box::pin(async move { Err(op.unavailable("not in this test")) })
}

impl Backend for Broken {
    fn watches_of(&self, _gvk: &GroupVersionKind, _namespace: Option<&str>) -> Vec<usize> {
        assert!(!self.broken, "a bug in the host's cache lookup");
        vec![0]
    }

    fn cached(&self, _target: &Target, _watches: &[usize]) -> Option<Arc<str>> {
        None
    }

    fn uid(&self, _target: &Target) -> Option<String> {
        None
    }

    fn select<'a>(
        &'a self,
        _selection: Selection<'a>,
        _limit: Option<usize>,
    ) -> BoxFuture<'a, Vec<Arc<str>>> {
        Box::pin(async { Vec::new() })
    }

    fn count<'a>(&'a self, _selection: Selection<'a>) -> BoxFuture<'a, usize> {
        Box::pin(async { 0 })
    }

    fn get<'a>(
        &'a self,
        op: &'a Op,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        not_in_this_test(op)
    }

    fn write<'a>(
        &'a self,
        op: &'a Op,
        _target: &'a Target,
        _write: Write<'a, Checked>,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        Box::pin(async move { Err(op.host_fault("the stored object could not be encoded")) })
    }

    fn delete<'a>(
        &'a self,
        op: &'a Op,
        _target: &'a Target,
        _options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        not_in_this_test(op)
    }

    fn record_event<'a>(
        &'a self,
        _op: &'a Op,
        _regarding: (&'a Target, Option<String>),
        _related: Option<(&'a Target, Option<String>)>,
        _event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(async { Ok(()) })
    }
}

/// The access of [`PLUGIN`], which may patch Nodes and Pods, over `Broken`.
fn access(broken: bool, metrics: &Arc<Metrics>) -> Arc<ClusterAccess> {
    let budget = Arc::new(PluginBudget::new(
        PLUGIN,
        Budget::default(),
        metrics.clone(),
    ));
    let verbs = |v: Verb| HashSet::from([Verb::Get, Verb::List, v]);
    let grants = HashMap::from([
        (GroupVersionKind::gvk("", "v1", "Node"), verbs(Verb::Patch)),
        (GroupVersionKind::gvk("", "v1", "Pod"), verbs(Verb::Patch)),
    ]);
    Arc::new(ClusterAccess::over(
        Declared::new(budget, grants),
        Arc::new(Granted::everything()),
        LeaderGate::always_open(),
        Arc::new(Broken { broken }),
    ))
}

#[support::test]
async fn a_panic_in_the_host_traps_the_plugins_call_and_is_not_held_against_it() -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let runtime =
        Arc::new(Runtime::new(Limits::default(), None).map_err(|e| anyhow::anyhow!("{e}"))?);
    let loaded = runtime
        .load(&crate::support::plugin_file("pod-counter"))
        .await?;
    let key = ReconcileKey::fixed("count");

    // pod-counter counts Pods first: the lookup of their cache panics.
    let error = (ReusedInstance::reconcile_once(&loaded.code, access(true, &metrics), &key).await)
        .err()
        .context("a reconcile through a panicking host call succeeded")?;
    let CallError::HostFault(message) = &error else {
        anyhow::bail!("a host fault reported as the plugin's: {error}");
    };
    ensure!(
        message.contains("host fault in count for plugin faulty")
            && message.contains("panicked: a bug in the host's cache lookup"),
        "{message}"
    );
    ensure!(error.blame() == Blame::Host, "{:?}", error.blame());
    let text = metrics.encode();
    let line = r#"wcm_host_calls_total{plugin="faulty",function="count",result="host_fault"} 1"#;
    ensure!(text.contains(line), "{line} not in\n{text}");

    // The process goes on, and so does the plugin: its next reconcile runs whole.
    let next = ReusedInstance::reconcile_once(&loaded.code, access(false, &metrics), &key).await;
    ensure!(next.is_ok(), "{next:?}");
    Ok(())
}

#[support::test]
async fn a_backends_host_fault_traps_instead_of_answering_the_plugin() -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let mut state = HostState::for_reconcile(access(false, &metrics), "key".into(), 64 << 20);
    let node = ObjectRef {
        kind: Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "Node".into(),
        },
        namespace: None,
        name: "control-plane".into(),
    };
    let set = vec![("counted".to_string(), "1".to_string())];
    let trapped = Cluster::patch_labels(&mut state, node, set, Vec::new()).await;
    let fault = trapped
        .err()
        .context("a host fault reached the plugin as an answer")?;
    let fault = fault
        .downcast_ref::<HostFault>()
        .context("the trap carries no host fault")?;
    ensure!(
        fault.to_string()
            == "host fault in patch-labels for plugin faulty: patch-labels v1/Node \
                control-plane: the stored object could not be encoded",
        "{fault}"
    );
    Ok(())
}
