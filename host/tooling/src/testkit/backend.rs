//! The in-memory cluster as a capability [`Backend`]: reads from what the plugin's
//! watches hold, writes on the store, a journal for the report, and a clock that
//! stands still. Every call answers at once.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, ready};
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;

use super::memory::{MemoryCluster, as_dynamic};
use super::store::StoreError;
use super::writes::failed;
use wcm_core::capabilities::{
    AskedWrite, Backend, CapabilityError, Checked, Op, Regarding, Selection, Target, Write,
};
use wcm_core::contract::{DeleteOptions, EventRecord};

impl Backend for MemoryCluster {
    fn fixed_clock(&self) -> Option<Duration> {
        Some(self.clock())
    }

    fn watches_of(&self, gvk: &GroupVersionKind, namespace: Option<&str>) -> Vec<usize> {
        MemoryCluster::watches_of(self, gvk, namespace)
    }

    fn cached(&self, target: &Target, watches: &[usize]) -> Option<Arc<str>> {
        self.trace(format!("  get {target} (from the cache)"));
        MemoryCluster::cached(self, target, watches)
    }

    fn uid(&self, target: &Target) -> Option<String> {
        MemoryCluster::uid(self, target)
    }

    fn select<'a>(
        &'a self,
        selection: Selection<'a>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Vec<Arc<str>>> {
        let found = self.matching(selection);
        self.trace(format!(
            "  list {} in {} matching {} (from the cache): {} found",
            self.watched_kind(selection.watches),
            selection.namespace.unwrap_or("all namespaces"),
            selection.selector,
            found.len()
        ));
        let first = found.into_values().take(limit.unwrap_or(usize::MAX));
        Box::pin(ready(first.map(Arc::from).collect()))
    }

    fn count<'a>(&'a self, selection: Selection<'a>) -> BoxFuture<'a, usize> {
        Box::pin(ready(self.matching(selection).len()))
    }

    fn get<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        let id = self.id(target);
        if let Some(error) = self.before_call(op) {
            return Box::pin(ready(Err(error)));
        }
        let found = self.world().store.get(&id).cloned();
        let found = found.ok_or_else(|| failed(op, target, StoreError::NotFound));
        Box::pin(ready(found.map(as_dynamic)))
    }

    fn write<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        write: Write<'a, Checked>,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        if let Some(error) = self.before_call(op) {
            return Box::pin(ready(Err(error)));
        }
        let written = self.write_now(op, target, write);
        let answered = match written {
            Ok(stored) => self.after_write(op).map_or(Ok(stored), Err),
            Err(e) => Err(e),
        };
        Box::pin(ready(answered))
    }

    fn delete<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        if let Some(error) = self.before_call(op) {
            return Box::pin(ready(Err(error)));
        }
        let deleted = self.delete_now(op, target, options);
        let answered = deleted.and_then(|()| self.after_write(op).map_or(Ok(()), Err));
        Box::pin(ready(answered))
    }

    fn record_event<'a>(
        &'a self,
        op: &'a Op,
        regarding: Regarding<'a>,
        related: Option<Regarding<'a>>,
        event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        if let Some(crashed) = self.after_crash(op) {
            return Box::pin(ready(Err(crashed)));
        }
        Box::pin(ready(self.event_now(regarding, related, event)))
    }

    fn journal(&self, target: &Target, request: AskedWrite<'_>, error: Option<&CapabilityError>) {
        self.journal_now(target, request, error);
    }
}
