//! The watch behind an informer: kube-runtime's watcher over whole objects or their
//! metadata (`PartialObjectMetadata`), each object decoded on its own ([`Decoded`]),
//! its events turned into the cache's objects and fed to the informer until it is
//! dropped.

use std::sync::Weak;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta};
use kube::core::{DynamicResourceScope, GroupVersionKind, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::Informer;
use crate::kube::decoded::Decoded;

/// The API of `informer`'s kind in its namespace (or all), as `K`: whole objects, or
/// their metadata only (kube asks the API server for `PartialObjectMetadata`).
pub(super) fn api<K>(client: Client, informer: &Informer) -> Api<K>
where
    K: kube::Resource<DynamicType = kube::api::ApiResource, Scope = DynamicResourceScope>,
{
    let resource = &informer.kind.resource;
    match &informer.scope.namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

/// An object as a metadata-only informer holds it: `apiVersion` and `kind` of the
/// watched kind (as controller-runtime's metadata cache has them) and its metadata.
pub fn metadata_of(metadata: ObjectMeta, gvk: &GroupVersionKind) -> DynamicObject {
    DynamicObject {
        types: Some(kube::api::TypeMeta {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
        }),
        metadata,
        data: serde_json::Value::Object(Default::default()),
    }
}

/// What a watch delivers, as the cache stores it.
pub(super) trait Watched:
    kube::Resource + serde::de::DeserializeOwned + std::fmt::Debug
{
    fn into_dynamic(self, gvk: &GroupVersionKind) -> DynamicObject;
}

impl Watched for DynamicObject {
    fn into_dynamic(self, _: &GroupVersionKind) -> DynamicObject {
        self
    }
}

impl Watched for PartialObjectMeta<DynamicObject> {
    fn into_dynamic(self, gvk: &GroupVersionKind) -> DynamicObject {
        metadata_of(self.metadata, gvk)
    }
}

/// A watched object decoded alone, as the cache stores it.
fn decoded_dynamic<K: Watched>(item: Decoded<K>, gvk: &GroupVersionKind) -> Decoded<DynamicObject> {
    match item {
        Decoded::Object(object) => Decoded::Object(object.into_dynamic(gvk)),
        Decoded::Undecodable(undecodable) => Decoded::Undecodable(undecodable),
    }
}

/// Feeds watch events into the informer until it is dropped or this watch (of
/// `generation`) is stopped. Errors (expired watches, an unreachable API server) are
/// logged and retried with kube's default backoff; a relist swaps the cache whole, so
/// no reader sees a half-rebuilt one.
pub(super) async fn run_watch<K>(
    api: Api<Decoded<K>>,
    config: watcher::Config,
    (informer, generation): (Weak<Informer>, u64),
) where
    K: Watched + Clone + Send + 'static,
{
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist = None;
    while let Some(item) = stream.next().await {
        let Some(informer) = informer.upgrade() else {
            return;
        };
        let gvk = &informer.scope.gvk;
        let item = item.map(|event| dynamic_event(event, gvk));
        informer.on_watch_item(generation, item, &mut relist);
    }
}

/// `event` with its object as the cache stores it.
fn dynamic_event<K: Watched>(
    event: Event<Decoded<K>>,
    gvk: &GroupVersionKind,
) -> Event<Decoded<DynamicObject>> {
    match event {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(decoded_dynamic(o, gvk)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(decoded_dynamic(o, gvk)),
        Event::Delete(o) => Event::Delete(decoded_dynamic(o, gvk)),
    }
}
