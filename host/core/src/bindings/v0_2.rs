//! Contract 0.2, served for plugins built before 0.3: its bindings and their
//! adaptation to the core's types. 0.2's `verb` enum becomes 0.3's verb strings, its
//! error variant the error record (already-exists reads as `conflict`, as it did), and
//! its delete an unconditional one. Frozen: `wit/compat/v0.2/controller.wit`.

wasmtime::component::bindgen!({
    path: "../../wit/compat/v0.2",
    world: "controller",
    // As 0.3's: a host fault traps the plugin's call.
    imports: { "wcm:controller/cluster": async | trappable, default: async },
    exports: { default: async },
});

use self::exports::wcm::controller::reconciler as wit;
use self::wcm::controller::cluster::{self as cluster_wit, Propagation};
use self::wcm::controller::types::{Error, EventType, Gvk, ObjectRef};
use self::wcm::controller::{log, types};
use crate::contract as c;
use crate::host_state::HostState;

/// A 0.2 watch: one namespace or all, every object whole, every update.
fn watch(w: wit::Watch) -> c::Watch {
    c::Watch {
        kind: gvk(w.kind),
        namespaces: w.namespace.into_iter().collect(),
        label_selector: w.label_selector,
        field_selector: None,
        metadata_only: false,
        predicates: Vec::new(),
        maps_to: key_mapping(w.maps_to),
    }
}

shared_conversions!();

/// What a 0.2 `reconcile` returned: an error is always retried (0.2 has no
/// terminal errors, nor `requeue`).
fn outcome(returned: Result<wit::Action, Error>) -> Result<c::Action, c::Failure> {
    match returned {
        Ok(wit::Action::Done) => Ok(c::Action::Done),
        Ok(wit::Action::RequeueAfter(ms)) => Ok(c::Action::RequeueAfter(ms)),
        Err(e) => Err(c::Failure {
            error: guest_error(e),
            terminal: false,
        }),
    }
}

/// A 0.2 permission's verbs as 0.3 spells them.
fn verbs(verbs: Vec<wit::Verb>) -> Vec<String> {
    verbs.into_iter().map(verb).collect()
}

/// A 0.2 plugin declares no metrics.
fn metrics(_: &mut wit::Registration) -> Vec<c::MetricDeclaration> {
    Vec::new()
}

/// A 0.2 verb as 0.3 spells it.
fn verb(v: wit::Verb) -> String {
    let verb = match v {
        wit::Verb::Get => c::Verb::Get,
        wit::Verb::List => c::Verb::List,
        wit::Verb::Patch => c::Verb::Patch,
        wit::Verb::Apply => c::Verb::Apply,
        wit::Verb::PatchStatus => c::Verb::PatchStatus,
        wit::Verb::Delete => c::Verb::Delete,
    };
    verb.to_string()
}

/// The error a 0.2 plugin returned.
fn guest_error(e: Error) -> c::GuestError {
    let (code, message) = match e {
        Error::NotFound(m) => (c::ErrorCode::NotFound, m),
        Error::Forbidden(m) => (c::ErrorCode::Forbidden, m),
        Error::Conflict(m) => (c::ErrorCode::Conflict, m),
        Error::Invalid(m) => (c::ErrorCode::Invalid, m),
        Error::Unavailable(m) => (c::ErrorCode::Unavailable, m),
        Error::Other(m) => (c::ErrorCode::Other, m),
    };
    c::GuestError::new(code, message)
}

/// A host call's error as a 0.2 plugin receives it: the case and message only.
fn wit_error(e: c::GuestError) -> Error {
    match e.code {
        c::ErrorCode::NotFound => Error::NotFound(e.message),
        c::ErrorCode::Forbidden => Error::Forbidden(e.message),
        c::ErrorCode::Conflict | c::ErrorCode::AlreadyExists => Error::Conflict(e.message),
        c::ErrorCode::Invalid => Error::Invalid(e.message),
        c::ErrorCode::Unavailable => Error::Unavailable(e.message),
        c::ErrorCode::Other => Error::Other(e.message),
    }
}

impl types::Host for HostState {}

impl cluster_wit::Host for HostState {
    shared_cluster_calls!();

    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        type_: EventType,
        reason: String,
        note: String,
    ) -> Answer<()> {
        let event = c::EventRecord {
            regarding: object(regarding),
            related: None,
            warning: matches!(type_, EventType::Warning),
            reason,
            action: String::new(),
            note,
        };
        answer(self.host_record_event(event).await)
    }

    async fn delete(&mut self, obj: ObjectRef, propagation: Propagation) -> Answer<()> {
        let options = c::DeleteOptions::unconditional(contract_propagation(propagation));
        answer(self.host_delete(object(obj), options).await)
    }
}

impl log::Host for HostState {
    async fn log(&mut self, level: log::Level, message: String) {
        self.host_log(contract_level(level), &message, Vec::new());
    }
}
