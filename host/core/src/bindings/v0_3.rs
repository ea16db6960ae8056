//! Contract 0.3, the current version (`wit/controller.wit`): its bindings and their
//! conversion to the core's types.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "controller",
    // A host fault traps the plugin's call (host_state's `fault`): the imports that
    // can meet one return `wasmtime::Result` of the contract's result.
    imports: {
        "wcm:controller/cluster": async | trappable,
        "wcm:controller/metrics": async | trappable,
        default: async,
    },
    exports: { default: async },
});

use self::exports::wcm::controller::reconciler as wit;
use self::wcm::controller::cluster::{self as cluster_wit, DeleteOptions, Event, Propagation};
use self::wcm::controller::types::{Cause, Error, ErrorCode, EventType, Gvk, ObjectRef};
use self::wcm::controller::{config, log, metrics as metrics_wit, types};
use crate::contract as c;
use crate::host_state::HostState;
use crate::metrics::plugin::Update;

shared_conversions!();

/// What a 0.3 `reconcile` returned.
fn outcome(returned: Result<wit::Action, wit::Failure>) -> Result<c::Action, c::Failure> {
    match returned {
        Ok(wit::Action::Done) => Ok(c::Action::Done),
        Ok(wit::Action::RequeueAfter(ms)) => Ok(c::Action::RequeueAfter(ms)),
        Ok(wit::Action::Requeue) => Ok(c::Action::Requeue),
        Err(wit::Failure::Retry(e)) => Err(failure(e, false)),
        Err(wit::Failure::Terminal(e)) => Err(failure(e, true)),
    }
}

fn failure(e: Error, terminal: bool) -> c::Failure {
    c::Failure {
        error: guest_error(e),
        terminal,
    }
}

/// A permission's verbs, spelled as the core spells them already.
fn verbs(verbs: Vec<String>) -> Vec<String> {
    verbs
}

/// The metrics the plugin declares.
fn metrics(r: &mut wit::Registration) -> Vec<c::MetricDeclaration> {
    std::mem::take(&mut r.metrics)
        .into_iter()
        .map(metric)
        .collect()
}

fn watch(w: wit::Watch) -> c::Watch {
    c::Watch {
        kind: gvk(w.kind),
        namespaces: w.namespaces,
        label_selector: w.label_selector,
        field_selector: w.field_selector,
        metadata_only: w.metadata_only,
        predicates: w.predicates,
        maps_to: key_mapping(w.maps_to),
    }
}

fn metric(m: wit::Metric) -> c::MetricDeclaration {
    c::MetricDeclaration {
        name: m.name,
        help: m.help,
        kind: match m.kind {
            wit::MetricKind::Counter => c::MetricKind::Counter,
            wit::MetricKind::Gauge => c::MetricKind::Gauge,
            wit::MetricKind::Histogram => c::MetricKind::Histogram,
        },
        labels: m.labels,
        buckets: m.buckets,
    }
}

/// The error a plugin returned from `reconcile`.
fn guest_error(e: Error) -> c::GuestError {
    c::GuestError {
        code: match e.code {
            ErrorCode::NotFound => c::ErrorCode::NotFound,
            ErrorCode::AlreadyExists => c::ErrorCode::AlreadyExists,
            ErrorCode::Conflict => c::ErrorCode::Conflict,
            ErrorCode::Forbidden => c::ErrorCode::Forbidden,
            ErrorCode::Invalid => c::ErrorCode::Invalid,
            ErrorCode::Unavailable => c::ErrorCode::Unavailable,
            ErrorCode::Other => c::ErrorCode::Other,
        },
        message: e.message,
        status: e.status,
        retry_after_ms: e.retry_after_ms,
        causes: (e.causes.into_iter())
            .map(|c| c::Cause {
                field: c.field,
                reason: c.reason,
                message: c.message,
                manager: c.manager,
            })
            .collect(),
    }
}

/// A host call's error as the plugin receives it.
fn wit_error(e: c::GuestError) -> Error {
    Error {
        code: match e.code {
            c::ErrorCode::NotFound => ErrorCode::NotFound,
            c::ErrorCode::AlreadyExists => ErrorCode::AlreadyExists,
            c::ErrorCode::Conflict => ErrorCode::Conflict,
            c::ErrorCode::Forbidden => ErrorCode::Forbidden,
            c::ErrorCode::Invalid => ErrorCode::Invalid,
            c::ErrorCode::Unavailable => ErrorCode::Unavailable,
            c::ErrorCode::Other => ErrorCode::Other,
        },
        message: e.message,
        status: e.status,
        retry_after_ms: e.retry_after_ms,
        causes: (e.causes.into_iter())
            .map(|c| Cause {
                field: c.field,
                reason: c.reason,
                message: c.message,
                manager: c.manager,
            })
            .collect(),
    }
}

impl types::Host for HostState {}

impl cluster_wit::Host for HostState {
    shared_cluster_calls!();

    async fn count(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Answer<u64> {
        answer(self.host_count(gvk(kind), namespace, label_selector).await)
    }

    async fn list_first(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
        limit: u32,
    ) -> Answer<Vec<String>> {
        let listed = self.host_list(gvk(kind), namespace, label_selector, Some(limit));
        answer(listed.await)
    }

    async fn patch_finalizers(
        &mut self,
        obj: ObjectRef,
        add: Vec<String>,
        remove: Vec<String>,
    ) -> Answer<()> {
        answer(self.host_patch_finalizers(object(obj), add, remove).await)
    }

    async fn create(&mut self, object: String) -> Answer<String> {
        answer(self.host_create(object).await)
    }

    async fn patch(
        &mut self,
        obj: ObjectRef,
        kind: cluster_wit::PatchType,
        patch: String,
        subresource: Option<String>,
    ) -> Answer<String> {
        let kind = match kind {
            cluster_wit::PatchType::Merge => c::PatchKind::Merge,
            cluster_wit::PatchType::Json => c::PatchKind::Json,
        };
        answer(self.host_patch(object(obj), kind, patch, subresource).await)
    }

    async fn update(&mut self, object: String) -> Answer<String> {
        answer(self.host_update(object).await)
    }

    async fn record_event(&mut self, event: Event) -> Answer<()> {
        let event = c::EventRecord {
            regarding: object(event.regarding),
            related: event.related.map(object),
            warning: matches!(event.type_, EventType::Warning),
            reason: event.reason,
            action: event.action,
            note: event.note,
        };
        answer(self.host_record_event(event).await)
    }

    async fn delete(&mut self, obj: ObjectRef, options: DeleteOptions) -> Answer<()> {
        let options = c::DeleteOptions {
            propagation: contract_propagation(options.propagation),
            uid: options.uid,
            resource_version: options.resource_version,
        };
        answer(self.host_delete(object(obj), options).await)
    }
}

impl metrics_wit::Host for HostState {
    async fn add(&mut self, name: String, labels: Vec<String>, value: f64) -> Answer<()> {
        answer(self.host_metric(Update::Add, &name, &labels, value))
    }

    async fn set(&mut self, name: String, labels: Vec<String>, value: f64) -> Answer<()> {
        answer(self.host_metric(Update::Set, &name, &labels, value))
    }

    async fn observe(&mut self, name: String, labels: Vec<String>, value: f64) -> Answer<()> {
        answer(self.host_metric(Update::Observe, &name, &labels, value))
    }
}

impl config::Host for HostState {
    async fn settings(&mut self) -> Option<String> {
        self.host_settings()
    }
}

impl log::Host for HostState {
    async fn log(&mut self, level: log::Level, message: String, fields: Vec<(String, String)>) {
        self.host_log(contract_level(level), &message, fields);
    }
}
