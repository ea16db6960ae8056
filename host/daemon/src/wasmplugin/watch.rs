//! The `WasmPlugin`s of the host's namespace as a stream of changes for the manager,
//! like the plugins directory's: one applied, one deleted, and after every (re)list the
//! names that exist, so one deleted while the watch was down is stopped too.
//!
//! Each object is decoded on its own ([`Decoded`]): one the host cannot decode (its
//! settings nested past the decoder's limit, a status field of the wrong type written
//! by someone else) is a change of its own, reported on that `WasmPlugin` alone, and
//! never fails the list the others come in.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::WasmPlugin;
use wcm_core::kube::decoded::{Decoded, Undecodable};

/// One change of the host's `WasmPlugin`s.
#[derive(Debug)]
pub enum ResourceChange {
    /// Created or changed (spec or status).
    Applied(Box<WasmPlugin>),
    /// Created or changed, but the host cannot decode it: its name (as far as it
    /// could be read) and why.
    Undecodable(Box<Undecodable>),
    /// Deleted.
    Deleted(String),
    /// A (re)list finished: these are all that exist.
    Listed(BTreeSet<String>),
    /// A Secret of the namespace changed (a pull Secret, perhaps).
    SecretChanged(String),
}

/// The changes of the `WasmPlugin`s in `namespace`, retried with backoff while the
/// watch fails (the CRD not installed, the API server away).
pub fn changes(
    client: Client,
    namespace: &str,
) -> impl Stream<Item = ResourceChange> + Send + use<> {
    let api: Api<Decoded<WasmPlugin>> = Api::namespaced(client, namespace);
    let mut listing = BTreeSet::new();
    let mut failing = Failing::default();
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
                    Some(applied(plugin))
                }
                Ok(watcher::Event::InitDone) => {
                    Some(ResourceChange::Listed(std::mem::take(&mut listing)))
                }
                Ok(watcher::Event::Apply(plugin)) => Some(applied(plugin)),
                Ok(watcher::Event::Delete(plugin)) => {
                    Some(ResourceChange::Deleted(plugin.name_any()))
                }
                Err(e) => {
                    failing.failed(&e);
                    None
                }
            };
            if change.is_some() {
                failing.works();
            }
            std::future::ready(change)
        })
}

/// Why the watch of `WasmPlugin`s fails, said once per cause rather than at every
/// retry: without the CRD installed it fails until it is.
#[derive(Default)]
struct Failing {
    said: Option<String>,
}

impl Failing {
    fn failed(&mut self, error: &watcher::Error) {
        let text = error.to_string();
        if self.said.as_ref() == Some(&text) {
            return tracing::debug!(error = %text, "watching WasmPlugins failed; retrying");
        }
        let missing =
            text.contains("404") || text.contains("could not find the requested resource");
        match missing {
            true => tracing::info!(
                "the WasmPlugin CRD is not installed: no WasmPlugin is \
                followed until it is (kubectl apply -f deploy/crds/wasmplugins.yaml)"
            ),
            false => tracing::warn!(error = %text, "watching WasmPlugins failed; retrying"),
        }
        self.said = Some(text);
    }

    fn works(&mut self) {
        if self.said.take().is_some() {
            tracing::info!("watching WasmPlugins works again");
        }
    }
}

/// The change a created or changed `WasmPlugin` is.
fn applied(plugin: Decoded<WasmPlugin>) -> ResourceChange {
    match plugin {
        Decoded::Object(plugin) => ResourceChange::Applied(Box::new(plugin)),
        Decoded::Undecodable(undecodable) => ResourceChange::Undecodable(undecodable),
    }
}

/// The names of the Secrets of `namespace` as they change (their metadata only,
/// never their content): a changed pull Secret tries its `WasmPlugin`s' failed pulls
/// again at once. Only changes after the first list count; a replica without the
/// right to watch Secrets says so once and relies on its pulls' retries.
pub fn secret_changes(
    client: Client,
    namespace: &str,
) -> impl Stream<Item = ResourceChange> + Send + use<> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::core::PartialObjectMeta;
    let api: Api<Decoded<PartialObjectMeta<Secret>>> = Api::namespaced(client, namespace);
    let mut warned = false;
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let changed = match event {
                Ok(watcher::Event::Apply(secret)) => {
                    Some(ResourceChange::SecretChanged(secret.name_any()))
                }
                Ok(_) => None,
                Err(e) if !warned => {
                    warned = true;
                    tracing::warn!(error = %e, "cannot watch the Secrets of the WasmPlugins' \
                        namespace: a changed pull Secret is used at the failed pull's next retry");
                    None
                }
                Err(e) => {
                    tracing::debug!(error = %e, "watching Secrets failed; retrying");
                    None
                }
            };
            std::future::ready(changed)
        })
}
