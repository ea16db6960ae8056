//! The in-memory cluster's writes, deletions and Events, made on the store as the API
//! server would make them (after the capability pipeline's checks), and the journal
//! of every write the plugin asked for, refused or made, for the report.

use kube::api::DynamicObject;
use serde_json::Value;

use super::memory::{MemoryCluster, World, as_dynamic};
use super::report::{Event, Write as Record};
use super::steps::{Change, OTHER_CONTROLLER};
use super::store::{Changed, FIXTURE_MANAGER, ObjectId, StoreError, describe};
use wcm_core::capabilities::{
    AskedWrite, CapabilityError, Checked, FinalizerChange, FinalizerList, LabelChange, LabelPatch,
    Op, Regarding, Target, Write,
};
use wcm_core::contract::{
    Capability, DeleteOptions, ErrorCode, EventRecord, GuestError, PatchKind, Propagation,
};
use wcm_core::kube::discovery::display_gvk;
use wcm_core::kube::object_writes::PatchBody;

impl MemoryCluster {
    /// Makes `write` on `target`; returns the object as stored.
    pub(super) fn write_now(
        &self,
        op: &Op,
        target: &Target,
        write: Write<'_, Checked>,
    ) -> Result<DynamicObject, CapabilityError> {
        let id = self.id(target);
        let manager = self.plugin.as_str();
        let fail = |e| failed(op, target, e);
        let stored = match write {
            Write::Labels(LabelPatch {
                change: LabelChange { set, remove },
                ..
            }) => {
                let mut world = self.world();
                let changed = world.store.patch_labels(&id, set, remove, manager);
                self.changed(&mut world, &id, changed.map_err(fail)?)
            }
            Write::Finalizers(FinalizerList {
                resource_version,
                finalizers,
            }) => {
                let mut world = self.world();
                let set = world
                    .store
                    .set_finalizers(&id, resource_version, finalizers);
                let (stored, changes) = set.map_err(fail)?;
                self.addressed(&mut world, &id, changes);
                stored
            }
            Write::Status(status) => {
                let mut world = self.world();
                let changed = world.store.patch_status(&id, status, manager);
                self.changed(&mut world, &id, changed.map_err(fail)?)
            }
            Write::Apply { object, force } => self.applied(op, target, object, force)?,
            Write::Create(object) => self.created(op, target, object)?,
            Write::Patch { body, subresource } => self.patched(op, target, &body, subresource)?,
            Write::Update(object) => self.updated(op, target, object)?,
            Write::Delete(never) => match never {},
        };
        Ok(as_dynamic(stored))
    }

    /// Notes `changed` (if the write changed anything) for the watches; returns the
    /// object at `id` as stored now.
    pub(super) fn changed(
        &self,
        world: &mut World,
        id: &ObjectId,
        changed: Option<Changed>,
    ) -> Value {
        world.changes.extend(changed.map(|c| (id.clone(), c)));
        world.store.get(id).cloned().unwrap_or_default()
    }

    /// Notes `changes` for the watches, each at the address of the object it changed
    /// (a deletion changes dependents too), `id` when it cannot say.
    pub(super) fn addressed(&self, world: &mut World, id: &ObjectId, changes: Vec<Changed>) {
        for changed in changes {
            let at = (changed.before.as_ref().or(changed.after.as_ref()))
                .and_then(|o| self.scopes.address(o).ok())
                .unwrap_or_else(|| id.clone());
            world.changes.push((at, changed));
        }
    }

    /// Server-side applies `object` as the plugin.
    fn applied(
        &self,
        op: &Op,
        target: &Target,
        object: &Value,
        force: bool,
    ) -> Result<Value, CapabilityError> {
        self.check_scope(op, target)?;
        let id = self.id(target);
        let mut world = self.world();
        let applied = world.store.apply(&id, object, &self.plugin, force);
        let (stored, changed) = applied.map_err(|e| failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored)
    }

    /// Refuses an object whose namespace does not fit its kind's scope, as the API
    /// server would.
    pub(super) fn check_scope(&self, op: &Op, target: &Target) -> Result<(), CapabilityError> {
        let namespaced = (self.scopes).namespaced(&target.gvk.group, &target.gvk.kind);
        if namespaced == target.namespace.is_some() {
            return Ok(());
        }
        Err(op.invalid(format!(
            "{} is {}namespaced, so the object must {}have metadata.namespace",
            display_gvk(&target.gvk),
            if namespaced { "" } else { "not " },
            if namespaced { "" } else { "not " },
        )))
    }

    /// Makes `change` as a user or another controller would, not as the plugin: no
    /// capability check, nothing in the report's writes; the watches see it.
    pub(super) fn change_from_outside(&self, change: &Change) -> Result<(), String> {
        let (Change::Apply(object) | Change::Status(object) | Change::Delete(object)) = change;
        let id = self.scopes.address(object)?;
        let fail = |e: StoreError| format!("{}: {e}", describe(object, &id));
        let mut world = self.world();
        match change {
            Change::Apply(object) => {
                let applied = world.store.apply(&id, object, FIXTURE_MANAGER, true);
                let (_, changed) = applied.map_err(fail)?;
                world.changes.extend(changed.map(|c| (id.clone(), c)));
            }
            Change::Status(object) => {
                let patched = (world.store).patch_status(&id, &object["status"], OTHER_CONTROLLER);
                let changed = patched.map_err(fail)?;
                world.changes.extend(changed.map(|c| (id.clone(), c)));
            }
            Change::Delete(_) => {
                let options = DeleteOptions::unconditional(Propagation::Background);
                let changes = world.store.delete(&id, &options).map_err(fail)?;
                self.addressed(&mut world, &id, changes);
            }
        }
        Ok(())
    }

    /// Deletes `target` if the preconditions of `options` hold.
    pub(super) fn delete_now(
        &self,
        op: &Op,
        target: &Target,
        options: &DeleteOptions,
    ) -> Result<(), CapabilityError> {
        let id = self.id(target);
        let mut world = self.world();
        let changes = (world.store.delete(&id, options)).map_err(|e| failed(op, target, e))?;
        self.addressed(&mut world, &id, changes);
        Ok(())
    }

    /// Records an Event, repeats of the same one counted.
    pub(super) fn event_now(
        &self,
        (regarding, _): Regarding<'_>,
        related: Option<Regarding<'_>>,
        e: &EventRecord,
    ) -> Result<(), CapabilityError> {
        let event = Event {
            regarding: regarding.to_string(),
            related: related.map(|(r, _)| r.to_string()),
            type_: if e.warning { "Warning" } else { "Normal" }.to_string(),
            reason: e.reason.clone(),
            action: (!e.action.is_empty()).then(|| e.action.clone()),
            note: e.note.clone(),
            count: 1,
        };
        let mut world = self.world();
        let same = |seen: &&mut Event| {
            Event {
                count: 1,
                ..(*seen).clone()
            } == event
        };
        match world.events.iter_mut().find(same) {
            Some(seen) => seen.count += 1,
            None => world.events.push(event),
        }
        Ok(())
    }

    /// Records the write `request` on `target` in the report, with its error if any.
    pub(super) fn journal_now(
        &self,
        target: &Target,
        request: AskedWrite<'_>,
        error: Option<&CapabilityError>,
    ) {
        let mut record = record_of(target, request);
        record.error = error.map(ToString::to_string);
        self.world().writes.push(record);
    }
}

/// A write request as the report shows it.
fn record_of(target: &Target, request: AskedWrite<'_>) -> Record {
    let record = |call: Capability| Record::new(call.name(), target);
    let some = |items: &[String]| (!items.is_empty()).then(|| items.to_vec());
    match request {
        AskedWrite::Labels(LabelChange { set, remove }) => Record {
            set: (!set.is_empty()).then(|| set.iter().cloned().collect()),
            remove: some(remove),
            ..record(Capability::PatchLabels)
        },
        AskedWrite::Finalizers(FinalizerChange { add, remove }) => Record {
            add: some(add),
            remove: some(remove),
            ..record(Capability::PatchFinalizers)
        },
        AskedWrite::Status(status) => Record {
            status: Some(as_json(status)),
            ..record(Capability::PatchStatus)
        },
        AskedWrite::Apply { object, force } => Record {
            applied: Some(as_json(object)),
            force: Some(force),
            ..record(Capability::Apply)
        },
        AskedWrite::Create(object) => Record {
            applied: Some(as_json(object)),
            ..record(Capability::Create)
        },
        AskedWrite::Update(object) => Record {
            applied: Some(as_json(object)),
            ..record(Capability::Update)
        },
        AskedWrite::Patch {
            body: (kind, patch),
            subresource,
        } => {
            let value = as_json(patch);
            let body = PatchBody::parse(kind, value.clone()).map_or(value, |b| b.to_value());
            let mut described = serde_json::json!({"type": kind_name(kind), "body": body});
            if let Some(sub) = subresource {
                described["subresource"] = serde_json::json!(sub);
            }
            Record {
                patch: Some(described),
                ..record(Capability::Patch)
            }
        }
        AskedWrite::Delete(options) => Record {
            propagation: Some(propagation_name(options.propagation).to_string()),
            preconditions: preconditions(options),
            ..record(Capability::Delete)
        },
    }
}

/// JSON text a plugin passed, parsed; as a string when it is not JSON.
fn as_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn kind_name(kind: PatchKind) -> &'static str {
    match kind {
        PatchKind::Merge => "merge",
        PatchKind::Json => "json",
    }
}

/// A store error as the plugin sees it, prefixed with the call, worded and with the
/// HTTP status as the API server gives them.
pub(super) fn failed(op: &str, target: &Target, error: StoreError) -> CapabilityError {
    let (code, status, message, causes) = match error {
        StoreError::NotFound => (
            ErrorCode::NotFound,
            404,
            format!("{op}: {} {:?} not found", target.gvk.kind, target.name),
            Vec::new(),
        ),
        StoreError::Conflict(m) => (ErrorCode::Conflict, 409, format!("{op}: {m}"), vec![]),
        StoreError::ApplyConflict(m, causes) => {
            (ErrorCode::Conflict, 409, format!("{op}: {m}"), causes)
        }
        StoreError::AlreadyExists => (
            ErrorCode::AlreadyExists,
            409,
            format!("{op}: {} {:?} already exists", target.gvk.kind, target.name),
            Vec::new(),
        ),
        StoreError::Invalid(m) => (ErrorCode::Invalid, 422, format!("{op}: {m}"), vec![]),
    };
    let mut error = GuestError::new(code, message);
    error.status = Some(status);
    error.causes = causes;
    CapabilityError::Api(Box::new(error))
}

/// A delete's preconditions as the report shows them (`uid=…`), if any.
fn preconditions(options: &DeleteOptions) -> Option<String> {
    let parts: Vec<String> = [
        ("uid", &options.uid),
        ("resourceVersion", &options.resource_version),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some(format!("{name}={}", value.as_deref()?)))
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn propagation_name(propagation: Propagation) -> &'static str {
    match propagation {
        Propagation::Background => "background",
        Propagation::Foreground => "foreground",
        Propagation::Orphan => "orphan",
    }
}
