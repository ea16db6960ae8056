//! How an informer takes in its watch's events: each object decoded alone, a (re)list
//! built on the side and swapped in whole, an object its watch cannot decode kept at
//! its last decodable version (or left out) and reported, and every change published
//! to the informer's subscribers.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use super::reports::Report;
use super::{CachedObject, Change, Informer, ObjectKey};
use crate::kube::decoded::{Decoded, Undecodable};
use crate::kube::discovery::display_gvk;

impl Informer {
    pub(super) fn on_event(
        &self,
        event: Event<Decoded<DynamicObject>>,
        relist: &mut Option<HashMap<ObjectKey, Arc<CachedObject>>>,
    ) {
        if matches!(
            event,
            Event::InitApply(_) | Event::Apply(_) | Event::Delete(_)
        ) {
            self.events.inc();
        }
        if !matches!(event, Event::Init) {
            self.working();
        }
        match event {
            Event::Init => {
                self.undecodable.listing();
                *relist = Some(HashMap::new());
            }
            Event::InitApply(Decoded::Object(obj)) => {
                if let (Some(buf), Some(o)) = (relist.as_mut(), self.convert(obj)) {
                    buf.insert(o.key(), o);
                }
            }
            Event::InitApply(Decoded::Undecodable(u)) => {
                // The last decodable version, if any, stays through the relist.
                let kept = self.saw_undecodable(&u).and_then(|key| self.cached(&key));
                if let (Some(buf), Some(o)) = (relist.as_mut(), kept) {
                    buf.insert(o.key(), o);
                }
            }
            Event::InitDone => self.listed(relist.take().unwrap_or_default()),
            Event::Apply(Decoded::Object(obj)) => {
                if let Some(o) = self.convert(obj) {
                    self.undecodable.forget(&o.key());
                    self.publish(&[self.cache.apply(o)]);
                }
            }
            Event::Apply(Decoded::Undecodable(u)) => {
                self.saw_undecodable(&u);
            }
            Event::Delete(deleted) => self.deleted(deleted),
        }
        self.objects.set(self.cache.len() as i64);
        self.bytes.set(self.cache.bytes() as i64);
    }

    /// `obj` as the cache holds it; `None` (logged) if it cannot be serialised.
    fn convert(&self, obj: DynamicObject) -> Option<Arc<CachedObject>> {
        match CachedObject::from_dynamic(obj) {
            Ok(o) => Some(Arc::new(o)),
            Err(e) => {
                tracing::warn!(kind = %display_gvk(&self.scope.gvk), error = %e, "unserialisable object skipped");
                None
            }
        }
    }

    /// Notes an object that does not decode, and reports a new version of it on the
    /// object (when this informer reports at all); its key, if it has a name.
    fn saw_undecodable(&self, object: &Undecodable) -> Option<ObjectKey> {
        let (key, new) = self.undecodable.saw(&self.labels.kind, object)?;
        if let (true, Some(reporter)) = (new, &self.reporter) {
            reporter.report(Report {
                gvk: self.scope.gvk.clone(),
                namespace: key.0.clone(),
                name: key.1.clone(),
                uid: object.meta.uid.clone(),
                cause: object.cause.clone(),
            });
        }
        Some(key)
    }

    fn cached(&self, (namespace, name): &ObjectKey) -> Option<Arc<CachedObject>> {
        self.cache.get(namespace.as_deref(), name)
    }

    /// A (re)list is complete: the cache becomes `fresh` whole.
    fn listed(&self, fresh: HashMap<ObjectKey, Arc<CachedObject>>) {
        self.undecodable.listed();
        let changes = self.cache.replace(fresh);
        self.lists.inc();
        let (kind, namespace) = (&self.labels.kind, &self.scope.namespace);
        match self.synced.send_replace(true) {
            true => tracing::info!(%kind, ?namespace, objects = self.cache.len(),
                "informer relisted; cache replaced whole"),
            false => tracing::info!(%kind, ?namespace, objects = self.cache.len(),
                "informer synced"),
        }
        self.publish(&changes);
    }

    /// An object was deleted: it goes by its key, whether or not it decodes.
    fn deleted(&self, deleted: Decoded<DynamicObject>) {
        let meta = kube::Resource::meta(&deleted);
        let key: ObjectKey = (
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        self.undecodable.forget(&key);
        let last = match deleted {
            Decoded::Object(obj) => self.convert(obj),
            Decoded::Undecodable(_) => None,
        };
        let change = self.cache.delete(&key).or(last.map(Change::Deleted));
        if let Some(change) = change {
            self.publish(&[change]);
        }
    }
}
