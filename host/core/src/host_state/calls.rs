//! The host calls a plugin makes, whichever contract version it speaks: each checks
//! its input, calls the plugin's [`ClusterAccess`] (the live cluster, or the test
//! kit's in-memory one), counts the call and returns the contract's error, or traps
//! with a [`HostFault`] when the host failed at its own part. The version modules in
//! [`crate::bindings`] only convert arguments and errors.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Value, json};
use tracing::Instrument;

use kube::core::GroupVersionKind;

use crate::capabilities::{
    CapabilityError, ClusterAccess, Target, bounds, check_kind, check_namespace, list_call,
};
use crate::contract::{
    Capability, DeleteOptions, EventRecord, GuestError, Gvk, ObjectRef, PatchKind,
};
use crate::keys::from_wit_gvk;
use crate::metrics::HostCallResult;

use super::HostState;
use super::fault::{HostFault, panic_message};
use crate::kube::discovery::display_gvk;
use crate::tape::{CallTape, Taped, answer_from_tape, answer_to_tape, parsed};

use super::call_span::{Call, kind_in};

/// A host call's answer: the plugin's result, or a host fault that traps its call.
pub(crate) type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

/// The object a plugin names, validated before it can reach a URL.
fn target(op: &str, plugin: &str, obj: ObjectRef) -> Result<Target, CapabilityError> {
    let gvk = from_wit_gvk(&obj.kind);
    Target::checked(op, plugin, gvk, obj.namespace, obj.name)
}

/// A kind as a tape writes it: `group/version/kind`.
fn kind_of(kind: &Gvk) -> String {
    display_gvk(&from_wit_gvk(kind))
}

/// An object a plugin names, as a tape writes it.
fn object_of(obj: &ObjectRef) -> Value {
    json!({"kind": kind_of(&obj.kind), "namespace": obj.namespace, "name": obj.name})
}

/// The kind and namespace of a `list`, `list-first` or `count`, validated.
fn checked_kind(
    op: &str,
    plugin: &str,
    kind: &Gvk,
    namespace: Option<&str>,
) -> Result<GroupVersionKind, CapabilityError> {
    let gvk = from_wit_gvk(kind);
    check_kind(op, plugin, &gvk)?;
    if let Some(ns) = namespace {
        check_namespace(op, plugin, ns)?;
    }
    Ok(gvk)
}

impl HostState {
    /// Counts one host call in `wcm_host_calls_total{plugin,function,result}` and
    /// hands its result on as the contract's error, or as a trap when the host failed
    /// at its own part (logged, since the plugin never sees it).
    pub(super) fn counted<T>(
        &self,
        function: Capability,
        result: Result<T, CapabilityError>,
    ) -> Answer<T> {
        let budget = self.access.as_ref().map(|access| access.budget());
        if let Err(CapabilityError::HostFault(message)) = result {
            let fault = HostFault::new(&self.plugin, function, message);
            tracing::error!(plugin = %self.plugin, key = self.key.as_deref().unwrap_or("-"),
                error = %fault, "host fault: the plugin's call traps and its key is retried");
            if let Some(budget) = budget {
                budget.host_call(function, HostCallResult::host_fault);
            }
            return Err(wasmtime::Error::new(fault));
        }
        let result = result.map_err(GuestError::from);
        if let Some(budget) = budget {
            budget.host_call(function, HostCallResult::of(&result));
        }
        Ok(result)
    }

    /// Runs one `cluster` import: `work` gets the plugin's access (or why there is
    /// none, during `register`) and its name, owned, since the call's future must not
    /// borrow the state; its result is counted as `function` and handed on as the
    /// contract's error. A panic in `work` is a host fault, not the worker's end.
    ///
    /// On a tape (`args`, from [`HostState::tape_args`], describes the call for it):
    /// recorded with its answer, or, in a replay, answered from the transcript
    /// without reaching the cluster.
    async fn call<T: Taped, Fut>(
        &mut self,
        Call { function, span }: Call,
        args: Option<Value>,
        work: impl FnOnce(Result<Arc<ClusterAccess>, CapabilityError>, Arc<str>, &'static str) -> Fut,
    ) -> Answer<T>
    where
        Fut: Future<Output = Result<T, CapabilityError>>,
    {
        if let (Some(CallTape::Replaying { .. }), Some(args)) = (&self.tape, &args) {
            return self.replayed(function, args);
        }
        let op = function.name();
        let working = work(self.shared_access(), self.plugin.clone(), op).instrument(span.clone());
        let result = match AssertUnwindSafe(working).catch_unwind().await {
            Ok(result) => result,
            Err(payload) => Err(CapabilityError::HostFault(panic_message(&*payload))),
        };
        let answer = self.counted(function, result);
        Call::ended(&span, &answer);
        if let (Some(tape), Some(args)) = (&mut self.tape, args) {
            tape.record(function.name(), args, answer_to_tape(&answer));
        }
        answer
    }

    /// The arguments of a call as a tape holds them, made only while there is one.
    fn tape_args(&self, args: impl FnOnce() -> Value) -> Option<Value> {
        self.tape.is_some().then(args)
    }

    /// A call answered from the transcript being replayed; a call it does not hold
    /// next traps, naming the first difference.
    fn replayed<T: Taped>(&mut self, function: Capability, args: &Value) -> Answer<T> {
        let Some(tape) = self.tape.as_mut() else {
            unreachable!("replaying")
        };
        let fault = |message: String| {
            Err(wasmtime::Error::new(HostFault::new(
                &self.plugin,
                function,
                message,
            )))
        };
        let answer = match tape.replay(function.name(), args) {
            Ok(answer) => answer,
            Err(difference) => return fault(format!("replay: {difference}")),
        };
        match answer_from_tape::<T>(&answer) {
            Some(Ok(result)) => Ok(result),
            Some(Err(trap)) => fault(trap),
            None => fault(format!(
                "replay: the transcript's answer to {} is not one: {answer}",
                function.name()
            )),
        }
    }

    /// `get`: one object's JSON.
    pub(crate) async fn host_get(&mut self, obj: ObjectRef) -> Answer<String> {
        let args = self.tape_args(|| json!({"object": object_of(&obj)}));
        self.call(
            Call::new(Capability::Get, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                let target = target(op, &plugin, obj)?;
                Ok(access?.get(&target).await?.to_string())
            },
        )
        .await
    }

    /// `list` and `list-first`: the JSON of matching objects of a watched kind, all
    /// or the first `limit`.
    pub(crate) async fn host_list(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
        limit: Option<u32>,
    ) -> Answer<Vec<String>> {
        let limit = limit.map(|l| l as usize);
        let called = list_call(limit);
        let args = self.tape_args(|| {
            json!({"kind": kind_of(&kind), "namespace": namespace, "labelSelector": label_selector,
                "limit": limit})
        });
        self.call(
            Call::new(called, || Some(kind_of(&kind))),
            args,
            |access, plugin, op| async move {
                bounds::selector(op, &plugin, label_selector.as_deref())?;
                let gvk = checked_kind(op, &plugin, &kind, namespace.as_deref())?;
                let (ns, selector) = (namespace.as_deref(), label_selector.as_deref());
                let found = access?.list(&gvk, ns, selector, limit).await?;
                Ok(found.iter().map(|j| j.to_string()).collect())
            },
        )
        .await
    }

    /// `count`: how many objects `list` would return.
    pub(crate) async fn host_count(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Answer<u64> {
        let args = self.tape_args(|| {
            json!({"kind": kind_of(&kind), "namespace": namespace, "labelSelector": label_selector})
        });
        self.call(
            Call::new(Capability::Count, || Some(kind_of(&kind))),
            args,
            |access, plugin, op| async move {
                bounds::selector(op, &plugin, label_selector.as_deref())?;
                let gvk = checked_kind(op, &plugin, &kind, namespace.as_deref())?;
                let (ns, selector) = (namespace.as_deref(), label_selector.as_deref());
                Ok(access?.count(&gvk, ns, selector).await? as u64)
            },
        )
        .await
    }

    /// `patch-labels`.
    pub(crate) async fn host_patch_labels(
        &mut self,
        obj: ObjectRef,
        set: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Answer<()> {
        let args = self.tape_args(|| {
            let set: serde_json::Map<String, Value> =
                set.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            json!({"object": object_of(&obj), "set": set, "remove": remove})
        });
        self.call(
            Call::new(Capability::PatchLabels, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                bounds::labels(op, &plugin, set.len(), remove.len())?;
                let target = target(op, &plugin, obj)?;
                access?.patch_labels(&target, &set, &remove).await
            },
        )
        .await
    }

    /// `patch-finalizers`.
    pub(crate) async fn host_patch_finalizers(
        &mut self,
        obj: ObjectRef,
        add: Vec<String>,
        remove: Vec<String>,
    ) -> Answer<()> {
        let args =
            self.tape_args(|| json!({"object": object_of(&obj), "add": add, "remove": remove}));
        self.call(
            Call::new(Capability::PatchFinalizers, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                let target = target(op, &plugin, obj)?;
                access?.patch_finalizers(&target, &add, &remove).await
            },
        )
        .await
    }

    /// `record-event`.
    pub(crate) async fn host_record_event(&mut self, event: EventRecord) -> Answer<()> {
        let args = self.tape_args(|| {
            json!({"regarding": object_of(&event.regarding),
                "related": event.related.as_ref().map(object_of),
                "type": if event.warning { "Warning" } else { "Normal" },
                "reason": event.reason, "action": event.action, "note": event.note})
        });
        self.call(
            Call::new(Capability::RecordEvent, || {
                Some(kind_of(&event.regarding.kind))
            }),
            args,
            |access, plugin, op| async move {
                let regarding = target(op, &plugin, event.regarding.clone())?;
                let related = match event.related.clone() {
                    Some(related) => Some(target("record-event related", &plugin, related)?),
                    None => None,
                };
                let access = access?;
                access
                    .record_event(&regarding, related.as_ref(), &event)
                    .await
            },
        )
        .await
    }

    /// `apply`: server-side apply of a whole object.
    pub(crate) async fn host_apply(&mut self, object: String, force: bool) -> Answer<String> {
        let args = self.tape_args(|| json!({"object": parsed(&object), "force": force}));
        self.call(
            Call::new(Capability::Apply, || kind_in(&object)),
            args,
            |access, plugin, op| async move {
                bounds::body(op, &plugin, "the object", &object)?;
                access?.apply(&object, force).await
            },
        )
        .await
    }

    /// `create`: the stored object's JSON.
    pub(crate) async fn host_create(&mut self, object: String) -> Answer<String> {
        let args = self.tape_args(|| json!({"object": parsed(&object)}));
        self.call(
            Call::new(Capability::Create, || kind_in(&object)),
            args,
            |access, plugin, op| async move {
                bounds::body(op, &plugin, "the object", &object)?;
                access?.create(&object).await
            },
        )
        .await
    }

    /// `patch`: the stored object's (or subresource's) JSON.
    pub(crate) async fn host_patch(
        &mut self,
        obj: ObjectRef,
        kind: PatchKind,
        patch: String,
        subresource: Option<String>,
    ) -> Answer<String> {
        let args = self.tape_args(|| {
            let kind = match kind {
                PatchKind::Merge => "merge",
                PatchKind::Json => "json",
            };
            json!({"object": object_of(&obj), "type": kind, "patch": parsed(&patch),
                "subresource": subresource})
        });
        self.call(
            Call::new(Capability::Patch, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                bounds::body(op, &plugin, "the patch", &patch)?;
                let target = target(op, &plugin, obj)?;
                (access?.patch(&target, kind, &patch, subresource.as_deref())).await
            },
        )
        .await
    }

    /// `update`: the stored object's JSON.
    pub(crate) async fn host_update(&mut self, object: String) -> Answer<String> {
        let args = self.tape_args(|| json!({"object": parsed(&object)}));
        self.call(
            Call::new(Capability::Update, || kind_in(&object)),
            args,
            |access, plugin, op| async move {
                bounds::body(op, &plugin, "the object", &object)?;
                access?.update(&object).await
            },
        )
        .await
    }

    /// `patch-status`.
    pub(crate) async fn host_patch_status(&mut self, obj: ObjectRef, status: String) -> Answer<()> {
        let args = self.tape_args(|| json!({"object": object_of(&obj), "status": parsed(&status)}));
        self.call(
            Call::new(Capability::PatchStatus, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                bounds::body(op, &plugin, "the status", &status)?;
                let target = target(op, &plugin, obj)?;
                access?.patch_status(&target, &status).await
            },
        )
        .await
    }

    /// `delete`, with its preconditions.
    pub(crate) async fn host_delete(
        &mut self,
        obj: ObjectRef,
        options: DeleteOptions,
    ) -> Answer<()> {
        let args = self.tape_args(|| {
            let propagation = match options.propagation {
                crate::contract::Propagation::Background => "background",
                crate::contract::Propagation::Foreground => "foreground",
                crate::contract::Propagation::Orphan => "orphan",
            };
            json!({"object": object_of(&obj), "propagation": propagation, "uid": options.uid,
                "resourceVersion": options.resource_version})
        });
        self.call(
            Call::new(Capability::Delete, || Some(kind_of(&obj.kind))),
            args,
            |access, plugin, op| async move {
                let preconditions = [&options.uid, &options.resource_version];
                for value in preconditions.into_iter().flatten() {
                    let max = bounds::MAX_PRECONDITION_BYTES;
                    bounds::at_most(op, &plugin, "a precondition", value.len(), max)?;
                }
                let target = target(op, &plugin, obj)?;
                access?.delete(&target, &options).await
            },
        )
        .await
    }
}
