//! The live cluster as a capability [`Backend`]: reads from the plugin's informer
//! caches, writes to the API server as the plugin (its client impersonates the
//! plugin's ServiceAccount, its field manager is the plugin's name), each stored
//! object read back into the caches that hold it.

mod listing;
mod writes;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;

use self::listing::Listing;
use super::{Backend, CapabilityError, Op, Selection, Target};
use crate::budget::PluginBudget;
use crate::kube::discovery::ResolvedKind;
use crate::kube::events::PluginRecorder;
use crate::kube::informer::{Informer, InformerRegistry};

/// One plugin's side of the live cluster.
pub struct LiveCluster {
    /// Its budget: its name is the field manager of its writes, and a kind the host
    /// must look up for it costs a request of its API rate.
    budget: Arc<PluginBudget>,
    /// The client its requests go through (impersonating its ServiceAccount).
    client: Client,
    /// The shared informers and the kind resolver.
    registry: Arc<InformerRegistry>,
    /// The informers of its watches, in registration order.
    informers: Vec<Arc<Informer>>,
    recorder: PluginRecorder,
}

impl std::fmt::Debug for LiveCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCluster")
            .field("plugin", &self.budget.plugin)
            .field("watches", &self.informers.len())
            .finish()
    }
}

impl LiveCluster {
    /// The live cluster as the plugin of `budget` reaches it: its `informers`, and
    /// `client` (which acts as the plugin) for what they do not hold and for writes.
    /// `instance` names this replica in the Events it records.
    pub(super) fn new(
        budget: Arc<PluginBudget>,
        instance: &str,
        registry: Arc<InformerRegistry>,
        client: Client,
        informers: Vec<Arc<Informer>>,
    ) -> LiveCluster {
        LiveCluster {
            recorder: PluginRecorder::new(client.clone(), &budget.plugin, instance),
            budget,
            client,
            registry,
            informers,
        }
    }

    /// Informers of `gvk` whose scope can hold objects of `namespace` (any, if none),
    /// with their watch index.
    fn caches_of<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (usize, &'a Arc<Informer>)> + 'a {
        self.informers.iter().enumerate().filter(move |(_, i)| {
            let scope = i.scope();
            scope.gvk == *gvk
                && match (&scope.namespace, namespace) {
                    (Some(watched), Some(ns)) => watched == ns,
                    _ => true,
                }
        })
    }

    /// The listing of the informers of `selection`'s watches.
    fn listing<'a>(&'a self, selection: Selection<'a>) -> Listing<'a> {
        let Selection {
            watches,
            namespace,
            selector,
        } = selection;
        let caches = (watches.iter())
            .filter_map(|index| self.informers.get(*index))
            .collect();
        Listing {
            caches,
            namespace,
            selector,
        }
    }

    /// The API resource of `gvk`, for an error message prefixed with `op`. A lookup
    /// the host has to make for it is a request the plugin caused: it takes a token of
    /// the plugin's API rate and is counted as one of its requests, like a write.
    async fn resolve(
        &self,
        op: &Op,
        gvk: &GroupVersionKind,
    ) -> Result<ResolvedKind, CapabilityError> {
        let resolver = self.registry.resolver();
        if !resolver.knows(gvk) {
            self.budget.api_request().await;
        }
        resolver.resolve(gvk).await.map_err(|e| op.invalid(e))
    }
}

impl Backend for LiveCluster {
    fn watches_of(&self, gvk: &GroupVersionKind, namespace: Option<&str>) -> Vec<usize> {
        self.caches_of(gvk, namespace)
            .map(|(index, _)| index)
            .collect()
    }

    fn cached(&self, target: &Target, watches: &[usize]) -> Option<Arc<str>> {
        let namespace = target.namespace.as_deref();
        (watches.iter())
            .filter_map(|index| self.informers.get(*index))
            .find_map(|i| i.cache().get(namespace, &target.name))
            .map(|o| o.json.clone())
    }

    fn uid(&self, target: &Target) -> Option<String> {
        let namespace = target.namespace.as_deref();
        self.caches_of(&target.gvk, namespace)
            .find_map(|(_, i)| i.cache().get(namespace, &target.name))
            .and_then(|o| o.uid.clone())
    }

    fn select<'a>(
        &'a self,
        selection: Selection<'a>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Vec<Arc<str>>> {
        let listing = self.listing(selection);
        Box::pin(async move {
            let found = listing.first(limit).await;
            found.into_iter().map(|o| o.json.clone()).collect()
        })
    }

    fn count<'a>(&'a self, selection: Selection<'a>) -> BoxFuture<'a, usize> {
        let listing = self.listing(selection);
        Box::pin(async move { listing.count().await })
    }

    fn served<'a>(
        &'a self,
        op: &'a Op,
        gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(async move { self.resolve(op, gvk).await.map(drop) })
    }

    fn get<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        Box::pin(self.read(op, target))
    }

    fn write<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        write: super::Write<'a, super::Checked>,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>> {
        Box::pin(self.write_as_plugin(op, target, write))
    }

    fn delete<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        options: &'a crate::contract::DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(self.delete_as_plugin(op, target, options))
    }

    fn record_event<'a>(
        &'a self,
        op: &'a Op,
        regarding: super::Regarding<'a>,
        related: Option<super::Regarding<'a>>,
        event: &'a crate::contract::EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(self.record_as_plugin(op, regarding, related, event))
    }

    fn remember(&self, target: &Target, written: &DynamicObject) {
        for (_, informer) in self.caches_of(&target.gvk, target.namespace.as_deref()) {
            informer.refresh(written);
        }
    }
}
