//! `WasmPlugin`s in the manager: each resource is a plugin slot beside the directory's
//! files, keyed `wasmplugin/<name>`, whose version comes from a registry instead of
//! the disk, and whose status is written as a projection of its pull and its row of
//! the plugin table (`followed.rs`).
//!
//! The resource's name is the plugin's identity; a file of the same identity and a
//! resource never both run: whichever comes second is refused, saying which holds it.
//! A failed pull is tried again with a doubling pause (5 s to 5 min) while the running
//! version, if any, runs on; at once when its pull Secret changes, or when this
//! replica comes to act for its plugins (it took the Lease). Every replica pulls and
//! loads (reads only), so a standby takes over warm; only the one that acts for a
//! plugin writes its status.
//!
//! A resource the host cannot decode, or whose name cannot be a plugin's, is refused
//! on its own: its plugin stops, its status and the plugin table say why, and the
//! others run on; it is taken up again as soon as it reads.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::followed::Followed;
use super::load::{FromResource, Source};
use super::plugins::Plugins;
use crate::status::WASMPLUGIN_ROW;
use crate::wasmplugin::{
    Fetcher, Pull, Pulls, ResourceChange, WasmPlugin, changes, secret_changes, status_patch,
};
use wcm_core::config::WasmPluginSource;
use wcm_core::kube::decoded::{Decoded, Undecodable};
use wcm_core::metrics::InformerLabels;
use wcm_core::registry::{PulledPlugins, Registry, SignatureError, TrustedKey};

/// The reason a resource the host cannot decode is refused for.
const UNDECODABLE: &str = "Undecodable";

/// The pull failures a change of the pull Secret may mend.
const CREDENTIAL_REASONS: [&str; 2] = ["Unauthorized", "PullSecretUnusable"];

/// The table key of `WasmPlugin` `name`.
pub(super) fn key_of(name: &str) -> String {
    format!("{WASMPLUGIN_ROW}{name}")
}

/// The host's `WasmPlugin`s, each a plugin of [`Plugins`] keyed `wasmplugin/<name>`.
pub(super) struct WasmPlugins {
    fetcher: Fetcher,
    /// Writes statuses; its answers are decoded alone, so a status written to a
    /// resource that does not decode is not taken for a failed write.
    api: Api<Decoded<WasmPlugin>>,
    /// The resources' changes, and the namespace's Secrets'.
    changes: BoxStream<'static, ResourceChange>,
    known: BTreeMap<String, Followed>,
    pulls: Pulls,
    /// `wcm_informer_undecodable_objects` of the `WasmPlugin`s.
    undecodable: prometheus_client::metrics::gauge::Gauge,
}

impl WasmPlugins {
    /// Follows the `WasmPlugin`s of `source`'s namespace as `client`, pulling
    /// components of at most `max_bytes`.
    pub(super) fn start(
        source: &WasmPluginSource,
        client: kube::Client,
        max_bytes: u64,
        metrics: &wcm_core::metrics::Metrics,
    ) -> Result<WasmPlugins, super::ManagerError> {
        let registry = Registry::with(source.registry.clone())?;
        let store = PulledPlugins::new(&source.pulled_dir).with_max_bytes(source.pulled_max_bytes);
        store.remove_leftovers();
        tracing::info!(namespace = %source.namespace,
            "following the WasmPlugins of this namespace (--wasm-plugin-namespace; \
             --no-wasm-plugins follows none)");
        let namespace = &source.namespace;
        let keys = (source.verify_keys.iter())
            .map(|path| read_key(path))
            .collect::<Result<_, _>>()?;
        let fetcher =
            Fetcher::new(registry, store, client.clone(), namespace, max_bytes).requiring(keys);
        let labels = InformerLabels {
            kind: "wasm-controller-manager.io/v1alpha1/WasmPlugin".into(),
            namespace: namespace.clone(),
            selector: String::new(),
            fields: String::new(),
            view: "object",
        };
        let changes = futures::stream::select(
            changes(client.clone(), namespace),
            secret_changes(client.clone(), namespace),
        );
        Ok(WasmPlugins {
            fetcher,
            api: Api::namespaced(client, namespace),
            changes: changes.boxed(),
            known: BTreeMap::new(),
            pulls: Pulls::default(),
            undecodable: metrics.informer_undecodable.get_or_create(&labels).clone(),
        })
    }

    /// The next change of the resources.
    pub(super) async fn next(&mut self) -> Option<ResourceChange> {
        self.changes.next().await
    }

    fn pull_of(&self, name: &str) -> Pull {
        let pulls = self.pulls.lock().unwrap_or_else(|p| p.into_inner());
        pulls.get(name).cloned().unwrap_or(Pull::None)
    }

    /// Applies one change of the resources to `plugins`.
    pub(super) fn changed(&mut self, change: ResourceChange, plugins: &mut Plugins) {
        match change {
            ResourceChange::Applied(plugin) => self.applied(*plugin, plugins),
            ResourceChange::Undecodable(found) => self.undecodable(*found, plugins),
            ResourceChange::Deleted(name) => self.deleted(&name, plugins),
            ResourceChange::Listed(names) => self.listed(&names, plugins),
            ResourceChange::SecretChanged(name) => self.pull_secret_changed(&name, plugins),
        }
        let refused =
            (self.known.values()).filter(|k| matches!(&k.refused, Some((UNDECODABLE, _))));
        self.undecodable.set(refused.count() as i64);
    }

    /// A resource the host cannot decode: refused on its own.
    fn undecodable(&mut self, found: Undecodable, plugins: &mut Plugins) {
        let Some(name) = found.meta.name.clone() else {
            return tracing::warn!(cause = %found.cause, "a WasmPlugin without a readable name");
        };
        let why = format!("the host cannot decode this WasmPlugin: {}", found.cause);
        self.refuse(&name, found.meta.generation, UNDECODABLE, why, plugins);
    }

    /// Refuses resource `name` (of `generation`) for `reason`: its plugin stops, the
    /// table and its status say `why`.
    fn refuse(
        &mut self,
        name: &str,
        generation: Option<i64>,
        reason: &'static str,
        why: String,
        plugins: &mut Plugins,
    ) {
        let status = self.known.remove(name).and_then(|k| k.status);
        let shown = wcm_core::logs::shorten(name);
        tracing::error!(plugin = %shown, reason, why, "WasmPlugin refused");
        let known = Followed::refused(generation, status, reason, why.clone());
        self.known.insert(name.to_string(), known);
        let key = key_of(name);
        plugins.stop(&key);
        plugins.refuse(&key, &why);
        self.write_status(name, plugins);
    }

    /// A pull Secret changed: each of its resources whose pull failed for want of
    /// credentials is tried again now.
    fn pull_secret_changed(&mut self, secret: &str, plugins: &mut Plugins) {
        let waiting: Vec<String> = (self.known.iter())
            .filter(|(_, k)| k.spec.pull_secret.as_deref() == Some(secret))
            .filter(|(name, _)| match self.pull_of(name) {
                Pull::Failed { reason, .. } => CREDENTIAL_REASONS.contains(&reason),
                _ => false,
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in waiting {
            tracing::info!(plugin = %name, secret, "its pull Secret changed: pulling again now");
            self.begin_load(&name, plugins);
        }
    }

    fn applied(&mut self, plugin: WasmPlugin, plugins: &mut Plugins) {
        let name = plugin.name_any();
        if let Err(rule) = wcm_core::plugin::name::check(&name) {
            let shown = wcm_core::logs::shorten(&name);
            let why = format!("the name {shown:?} cannot be a plugin's: {rule}");
            let generation = plugin.metadata.generation;
            return self.refuse(&name, generation, "InvalidName", why, plugins);
        }
        let (known, spec_changed) = Followed::applied(&plugin, self.known.remove(&name));
        self.known.insert(name.clone(), known);
        if !spec_changed {
            return;
        }
        if plugin.spec.paused {
            tracing::info!(plugin = %name, "WasmPlugin paused; stopping the plugin");
            plugins.stop(&key_of(&name));
            return self.write_status(&name, plugins);
        }
        self.begin_load(&name, plugins);
    }

    fn deleted(&mut self, name: &str, plugins: &mut Plugins) {
        if self.known.remove(name).is_none() {
            return;
        }
        (self.pulls.lock().unwrap_or_else(|p| p.into_inner())).remove(name);
        tracing::info!(plugin = %name, "WasmPlugin deleted; stopping the plugin");
        plugins.stop(&key_of(name));
    }

    /// After a (re)list: resources deleted while the watch was down are stopped.
    fn listed(&mut self, names: &BTreeSet<String>, plugins: &mut Plugins) {
        let gone: Vec<String> = (self.known.keys())
            .filter(|name| !names.contains(*name))
            .cloned()
            .collect();
        for name in gone {
            self.deleted(&name, plugins);
        }
    }

    /// Starts fetching and loading `WasmPlugin` `name` in a task of its own, unless a
    /// plugin file holds its identity.
    fn begin_load(&mut self, name: &str, plugins: &mut Plugins) {
        let key = key_of(name);
        let file = format!("{name}.wasm");
        if plugins.known(&file) {
            let reason = format!("the identity {name} is taken by the plugin file {file}");
            tracing::error!(plugin = %name, reason, "WasmPlugin refused");
            plugins.refuse(&key, &reason);
            return self.write_status(name, plugins);
        }
        let Some(known) = self.known.get(name) else {
            return;
        };
        let source = Source::Resource(Box::new(FromResource {
            name: name.to_string(),
            spec: known.spec.clone(),
            pinned: known.status.as_ref().and_then(|s| s.image.clone()),
            fetcher: self.fetcher.clone(),
            pulls: self.pulls.clone(),
        }));
        plugins.drop_next(&key);
        plugins.load(&key, source);
    }

    /// Loads `WasmPlugin` `name` again (its running version's code is gone).
    pub(super) fn load_again(&mut self, name: &str, plugins: &mut Plugins) {
        self.begin_load(name, plugins);
    }

    /// After the load of `key` settled (`started`: its version now runs): if it is a
    /// resource's, schedules a retry of a failed pull, and writes its status.
    pub(super) fn settled(&mut self, key: &str, started: bool, plugins: &Plugins) {
        let Some(name) = key.strip_prefix(WASMPLUGIN_ROW) else {
            return;
        };
        let pull = self.pull_of(name);
        if let Some(known) = self.known.get_mut(name) {
            known.settled(&pull, started);
        }
        self.write_status(name, plugins);
    }

    /// Tries again every pull that failed, now: this replica has just come to act for
    /// its plugins (it took the Lease), and a pull backed off for minutes must not
    /// hold up the plugin it now runs.
    pub(super) fn retry_pulls_now(&mut self, plugins: &mut Plugins) {
        let failed: Vec<String> = (self.known.iter())
            .filter(|(_, k)| k.retry.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        for name in failed {
            tracing::info!(plugin = %name, "this replica leads now: pulling again at once");
            self.begin_load(&name, plugins);
        }
    }

    /// Tries again the pulls that failed and are due.
    pub(super) fn retry_pulls(&mut self, plugins: &mut Plugins) {
        let now = Instant::now();
        let due: Vec<String> = (self.known.iter_mut())
            .filter_map(|(name, known)| known.reschedule_if_due(now).then(|| name.clone()))
            .collect();
        for name in due {
            self.begin_load(&name, plugins);
        }
    }

    /// Writes every resource's status that changed (health moves rows without a load).
    pub(super) fn refresh_statuses(&mut self, plugins: &Plugins) {
        let names: Vec<String> = self.known.keys().cloned().collect();
        for name in names {
            self.write_status(&name, plugins);
        }
    }

    /// Writes `name`'s status if it changed, while this replica acts for it (a
    /// standby's view is the holder's to report): whole, every field it leaves out
    /// cleared.
    fn write_status(&mut self, name: &str, plugins: &Plugins) {
        if !plugins.reports_on(name) {
            return;
        }
        let row = plugins.row(&key_of(name));
        let pull = self.pull_of(name);
        let Some(known) = self.known.get_mut(name) else {
            return;
        };
        let Some(status) = known.new_status(&pull, row.as_ref()) else {
            return;
        };
        let (api, name) = (self.api.clone(), name.to_string());
        tokio::spawn(async move {
            let patch = Patch::Merge(status_patch(&status));
            if let Err(e) = (api.patch_status(&name, &PatchParams::default(), &patch)).await {
                tracing::warn!(plugin = %wcm_core::logs::shorten(&name), error = %e,
                    "could not write the WasmPlugin's status");
            }
        });
    }
}

/// The key in the PEM file `path`.
fn read_key(path: &std::path::Path) -> Result<TrustedKey, SignatureError> {
    let what = path.display().to_string();
    let pem = std::fs::read_to_string(path).map_err(|e| SignatureError::BadKey {
        what: what.clone(),
        why: e.to_string(),
    })?;
    TrustedKey::from_pem(&pem, &what)
}

/// The next change of `resources`, or never when there are none.
pub(super) async fn next_change(resources: &mut Option<WasmPlugins>) -> Option<ResourceChange> {
    match resources {
        Some(resources) => resources.next().await,
        None => std::future::pending().await,
    }
}
