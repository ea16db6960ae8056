//! The `WasmPlugin`s of the host's namespace as a stream of changes for the manager,
//! like the plugins directory's: one applied, one deleted, and after every (re)list the
//! names that exist, so one deleted while the watch was down is stopped too.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::WasmPlugin;

/// One change of the host's `WasmPlugin`s.
#[derive(Debug)]
pub enum ResourceChange {
    /// Created or changed (spec or status).
    Applied(Box<WasmPlugin>),
    /// Deleted.
    Deleted(String),
    /// A (re)list finished: these are all that exist.
    Listed(BTreeSet<String>),
}

/// The changes of the `WasmPlugin`s in `namespace`, retried with backoff while the
/// watch fails (the CRD not installed, the API server away).
pub fn changes(
    client: Client,
    namespace: &str,
) -> impl Stream<Item = ResourceChange> + Send + use<> {
    let api: Api<WasmPlugin> = Api::namespaced(client, namespace);
    let mut listing = BTreeSet::new();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let change = match event {
                Ok(watcher::Event::Init) => {
                    listing.clear();
                    None
                }
                Ok(watcher::Event::InitApply(plugin)) => {
                    listing.insert(plugin.name_any());
                    Some(ResourceChange::Applied(Box::new(plugin)))
                }
                Ok(watcher::Event::InitDone) => {
                    Some(ResourceChange::Listed(std::mem::take(&mut listing)))
                }
                Ok(watcher::Event::Apply(plugin)) => {
                    Some(ResourceChange::Applied(Box::new(plugin)))
                }
                Ok(watcher::Event::Delete(plugin)) => {
                    Some(ResourceChange::Deleted(plugin.name_any()))
                }
                Err(e) => {
                    tracing::debug!(error = %e, "watching WasmPlugins failed; retrying");
                    None
                }
            };
            std::future::ready(change)
        })
}
