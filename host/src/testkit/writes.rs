//! The in-memory cluster's side of a plugin's `cluster` imports: the same checks as
//! the live cluster (declared verbs, label rules, Event reasons, result sizes), then
//! the write on the store, recorded for the report.

use crate::metrics::plugin::PluginMetrics;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, ready};
use kube::core::GroupVersionKind;
use serde_json::Value;

use super::memory::MemoryCluster;
use super::report::{Event, Write};
use super::store::{CLOCK_SINCE_EPOCH, StoreError};
use crate::budget::PluginBudget;
use crate::capabilities::{CapabilityError, PluginCluster, Target, applied_target};
use crate::contract::{
    DeleteOptions, ErrorCode, EventRecord, GuestError, PatchKind, Propagation, Verb,
};
use crate::kube::discovery::display_gvk;
use crate::kube::finalizers;
use crate::kube::writes::label_patch;

impl MemoryCluster {
    /// Records `write` with the outcome of `result` and hands the result on.
    pub(super) fn recorded<T>(
        &self,
        mut write: Write,
        result: Result<T, CapabilityError>,
    ) -> Result<T, CapabilityError> {
        write.error = result.as_ref().err().map(ToString::to_string);
        self.world().writes.push(write);
        result
    }

    /// A store error as the plugin sees it, prefixed with the call, worded and with
    /// the HTTP status as the API server gives them.
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

    fn labels_now(
        &self,
        target: &Target,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        let op = format!("patch-labels {target}");
        self.declared.require(Verb::Patch, "patch-labels", target)?;
        label_patch(set, remove).map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))?;
        let id = self.id(target);
        let mut world = self.world();
        let changed = (world
            .store
            .patch_labels(&id, set, remove, &self.declared.plugin))
        .map_err(|e| Self::failed(&op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(())
    }

    fn finalizers_now(
        &self,
        target: &Target,
        add: &[String],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        let op = format!("patch-finalizers {target}");
        self.declared
            .require(Verb::Patch, "patch-finalizers", target)?;
        finalizers::check(add, remove)
            .map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))?;
        let id = self.id(target);
        let mut world = self.world();
        let changes = (world.store.patch_finalizers(&id, add, remove))
            .map_err(|e| Self::failed(&op, target, e))?;
        world
            .changes
            .extend(changes.into_iter().map(|c| (id.clone(), c)));
        Ok(())
    }

    fn apply_now(&self, object: &Value, force: bool) -> Result<String, CapabilityError> {
        let plugin = &self.declared.plugin;
        let target = applied_target(object)
            .map_err(|e| CapabilityError::Invalid(format!("apply: the object {e}")))?;
        let target = Target::checked("apply", plugin, target.gvk, target.namespace, target.name)?;
        let op = format!("apply {target}");
        self.declared.require(Verb::Apply, "apply", &target)?;
        self.check_scope(&op, &target)?;
        let id = self.id(&target);
        let mut world = self.world();
        let (stored, changed) = (world.store.apply(&id, object, plugin, force))
            .map_err(|e| Self::failed(&op, &target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored.to_string())
    }

    /// Refuses an object whose namespace does not fit its kind's scope, as the API
    /// server would.
    pub(super) fn check_scope(&self, op: &str, target: &Target) -> Result<(), CapabilityError> {
        let namespaced = (self.scopes).namespaced(&target.gvk.group, &target.gvk.kind);
        if namespaced == target.namespace.is_some() {
            return Ok(());
        }
        Err(CapabilityError::Invalid(format!(
            "{op}: {} is {}namespaced, so the object must {}have metadata.namespace",
            display_gvk(&target.gvk),
            if namespaced { "" } else { "not " },
            if namespaced { "" } else { "not " },
        )))
    }

    fn status_now(&self, target: &Target, status: &Value) -> Result<(), CapabilityError> {
        let op = format!("patch-status {target}");
        self.declared
            .require(Verb::PatchStatus, "patch-status", target)?;
        let id = self.id(target);
        let mut world = self.world();
        let changed = (world.store.patch_status(&id, status, &self.declared.plugin))
            .map_err(|e| Self::failed(&op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(())
    }

    fn delete_now(&self, target: &Target, options: &DeleteOptions) -> Result<(), CapabilityError> {
        let op = format!("delete {target}");
        self.declared.require(Verb::Delete, "delete", target)?;
        let id = self.id(target);
        let mut world = self.world();
        let changes =
            (world.store.delete(&id, options)).map_err(|e| Self::failed(&op, target, e))?;
        for changed in changes {
            let at = (changed.before.as_ref().or(changed.after.as_ref()))
                .and_then(|o| self.scopes.address(o).ok())
                .unwrap_or_else(|| id.clone());
            world.changes.push((at, changed));
        }
        Ok(())
    }

    fn event_now(
        &self,
        regarding: &Target,
        related: Option<&Target>,
        e: &EventRecord,
    ) -> Result<(), CapabilityError> {
        self.declared.check_event(regarding, related, e)?;
        let object = (
            display_gvk(&regarding.gvk),
            regarding.namespace.clone(),
            regarding.name.clone(),
            None,
        );
        if !self.declared.budget.events.allow(&object) {
            return Ok(()); // dropped by the spam filter, as the live host drops it
        }
        let event = Event {
            regarding: regarding.to_string(),
            related: related.map(ToString::to_string),
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
}

/// The JSON a plugin passed, or `invalid` naming the call.
fn json(op: &str, what: &str, text: &str) -> Result<Value, CapabilityError> {
    serde_json::from_str(text)
        .map_err(|e| CapabilityError::Invalid(format!("{op}: the {what} is not JSON: {e}")))
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

impl PluginCluster for MemoryCluster {
    fn plugin(&self) -> &str {
        &self.declared.plugin
    }

    fn budget(&self) -> &Arc<PluginBudget> {
        &self.declared.budget
    }

    fn plugin_metrics(&self) -> &PluginMetrics {
        &self.declared.metrics
    }

    fn fixed_clock(&self) -> Option<Duration> {
        Some(CLOCK_SINCE_EPOCH)
    }

    fn get<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Arc<str>, CapabilityError>> {
        Box::pin(ready(self.read(target)))
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Arc<str>>, CapabilityError>> {
        Box::pin(async move { self.read_all(gvk, namespace, label_selector, limit) })
    }

    fn count<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<usize, CapabilityError>> {
        let matching = self.matching("count", gvk, namespace, label_selector);
        Box::pin(async move { Ok(matching?.1.len()) })
    }

    fn patch_labels<'a>(
        &'a self,
        target: &'a Target,
        set: &'a [(String, String)],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        let mut write = Write::new("patch-labels", target);
        write.set = (!set.is_empty()).then(|| set.iter().cloned().collect());
        write.remove = (!remove.is_empty()).then(|| remove.to_vec());
        let result = self.labels_now(target, set, remove);
        Box::pin(ready(self.recorded(write, result)))
    }

    fn patch_finalizers<'a>(
        &'a self,
        target: &'a Target,
        add: &'a [String],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        let mut write = Write::new("patch-finalizers", target);
        write.add = (!add.is_empty()).then(|| add.to_vec());
        write.remove = (!remove.is_empty()).then(|| remove.to_vec());
        let result = self.finalizers_now(target, add, remove);
        Box::pin(ready(self.recorded(write, result)))
    }

    fn create<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ready(self.create_now(object)))
    }

    fn patch<'a>(
        &'a self,
        target: &'a Target,
        kind: PatchKind,
        patch: &'a str,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ready(self.patch_now(target, kind, patch, subresource)))
    }

    fn update<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ready(self.update_now(object)))
    }

    fn apply<'a>(
        &'a self,
        object: &'a str,
        force: bool,
    ) -> BoxFuture<'a, Result<String, CapabilityError>> {
        let result = json("apply", "object", object).and_then(|value| {
            let mut write = Write::new("apply", describe(&value));
            write.applied = Some(value.clone());
            write.force = Some(force);
            let result = self.apply_now(&value, force);
            self.recorded(write, result)
        });
        Box::pin(ready(result))
    }

    fn patch_status<'a>(
        &'a self,
        target: &'a Target,
        status: &'a str,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        let op = format!("patch-status {target}");
        let result = json(&op, "status", status).and_then(|value| {
            let mut write = Write::new("patch-status", target);
            write.status = Some(value.clone());
            let result = self.status_now(target, &value);
            self.recorded(write, result)
        });
        Box::pin(ready(result))
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target,
        options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        let mut write = Write::new("delete", target);
        write.propagation = Some(propagation_name(options.propagation).to_string());
        write.preconditions = preconditions(options);
        let result = self.delete_now(target, options);
        Box::pin(ready(self.recorded(write, result)))
    }

    fn record_event<'a>(
        &'a self,
        regarding: &'a Target,
        related: Option<&'a Target>,
        event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ready(self.event_now(regarding, related, event)))
    }
}

/// How an applied object is named in the report, even when it is incomplete.
fn describe(object: &Value) -> String {
    match applied_target(object) {
        Ok(target) => target.to_string(),
        Err(e) => format!("(an object that {e})"),
    }
}
