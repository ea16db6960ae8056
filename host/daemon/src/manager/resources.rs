//! `WasmPlugin`s in the manager: each resource is a plugin slot beside the directory's
//! files, keyed `wasmplugin/<name>`, whose version comes from a registry instead of
//! the disk, and whose status is written as a projection of its pull and its row of
//! the plugin table.
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
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::{Api, ResourceExt};

use super::Manager;
use super::load::{FromResource, LoadJob, Source};
use crate::status::{PluginStatus, WASMPLUGIN_ROW};
use crate::wasmplugin::{
    Fetcher, Pull, Pulls, ResourceChange, WasmPlugin, WasmPluginSpec, WasmPluginStatus, changes,
    secret_changes,
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

/// First pause before a failed pull is tried again; doubled up to [`MAX_PULL_PAUSE`].
const FIRST_PULL_PAUSE: Duration = Duration::from_secs(5);
/// Longest pause between tries of a failing pull.
const MAX_PULL_PAUSE: Duration = Duration::from_secs(300);

/// One resource as last seen.
pub(super) struct Known {
    pub spec: WasmPluginSpec,
    pub generation: Option<i64>,
    /// Its status as last seen or written: the pin, and conditions' transition times.
    pub status: Option<WasmPluginStatus>,
    /// When a failed pull is tried again, and the pause after that.
    retry: Option<(Instant, Duration)>,
    /// The pinned reference and digest of the version running.
    pub running: Option<(String, String)>,
    /// Why the host refuses the resource itself (condition reason, message).
    pub refused: Option<(&'static str, String)>,
}

/// The manager's view of the host's `WasmPlugin`s.
pub(super) struct Resources {
    fetcher: Fetcher,
    /// Writes statuses; its answers are decoded alone, so a status written to a
    /// resource that does not decode is not taken for a failed write.
    pub api: Api<Decoded<WasmPlugin>>,
    /// The resources' changes, and the namespace's Secrets'.
    changes: BoxStream<'static, ResourceChange>,
    pub known: BTreeMap<String, Known>,
    pulls: Pulls,
    /// `wcm_informer_undecodable_objects` of the `WasmPlugin`s.
    undecodable: prometheus_client::metrics::gauge::Gauge,
}

impl Resources {
    /// Follows the `WasmPlugin`s of `source`'s namespace as `client`, pulling
    /// components of at most `max_bytes`.
    pub(super) fn start(
        source: &WasmPluginSource,
        client: kube::Client,
        max_bytes: u64,
        metrics: &wcm_core::metrics::Metrics,
    ) -> Result<Resources, super::ManagerError> {
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
        Ok(Resources {
            fetcher,
            api: Api::namespaced(client.clone(), namespace),
            changes: futures::stream::select(
                changes(client.clone(), namespace),
                secret_changes(client, namespace),
            )
            .boxed(),
            known: BTreeMap::new(),
            pulls: Pulls::default(),
            undecodable: metrics.informer_undecodable.get_or_create(&labels).clone(),
        })
    }

    /// Counts the resources refused as undecodable.
    fn count_undecodable(&self) {
        let refused =
            (self.known.values()).filter(|k| matches!(&k.refused, Some((UNDECODABLE, _))));
        self.undecodable.set(refused.count() as i64);
    }

    /// The next change of the resources.
    pub(super) async fn next(&mut self) -> Option<ResourceChange> {
        self.changes.next().await
    }

    /// Names whose failed pull is due again.
    fn due(&self, now: Instant) -> Vec<String> {
        let due = |(name, known): (&String, &Known)| {
            let (at, _) = known.retry?;
            (at <= now).then(|| name.clone())
        };
        self.known.iter().filter_map(due).collect()
    }

    pub(super) fn pull_of(&self, name: &str) -> Pull {
        let pulls = self.pulls.lock().unwrap_or_else(|p| p.into_inner());
        pulls.get(name).cloned().unwrap_or(Pull::None)
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
pub(super) async fn next_change(resources: &mut Option<Resources>) -> Option<ResourceChange> {
    match resources {
        Some(resources) => resources.next().await,
        None => std::future::pending().await,
    }
}

impl Manager {
    /// Applies one change of the host's `WasmPlugin`s.
    pub(super) fn resource_changed(&mut self, change: ResourceChange) {
        match change {
            ResourceChange::Applied(plugin) => self.resource_applied(*plugin),
            ResourceChange::Undecodable(found) => self.resource_undecodable(*found),
            ResourceChange::Deleted(name) => self.resource_deleted(&name),
            ResourceChange::Listed(names) => self.resources_listed(&names),
            ResourceChange::SecretChanged(name) => self.pull_secret_changed(&name),
        }
        if let Some(resources) = &self.resources {
            resources.count_undecodable();
        }
    }

    /// A resource the host cannot decode: refused on its own.
    fn resource_undecodable(&mut self, found: Undecodable) {
        let Some(name) = found.meta.name.clone() else {
            return tracing::warn!(cause = %found.cause, "a WasmPlugin without a readable name");
        };
        let why = format!("the host cannot decode this WasmPlugin: {}", found.cause);
        self.refuse_resource(&name, found.meta.generation, UNDECODABLE, why);
    }

    /// Refuses resource `name` (of `generation`) for `reason`: its plugin stops, the
    /// table and its status say `why`.
    fn refuse_resource(
        &mut self,
        name: &str,
        generation: Option<i64>,
        reason: &'static str,
        why: String,
    ) {
        let Some(resources) = &mut self.resources else {
            return;
        };
        let status = resources.known.remove(name).and_then(|k| k.status);
        let shown = wcm_core::logs::shorten(name);
        tracing::error!(plugin = %shown, reason, why, "WasmPlugin refused");
        resources.known.insert(
            name.to_string(),
            Known {
                spec: WasmPluginSpec::default(),
                generation,
                status,
                retry: None,
                running: None,
                refused: Some((reason, why.clone())),
            },
        );
        let key = key_of(name);
        self.stop_slot(&key);
        self.table.set(PluginStatus::failed(&key, &why));
        self.write_status(name);
    }

    /// A pull Secret changed: each of its resources whose pull failed for want of
    /// credentials is tried again now.
    fn pull_secret_changed(&mut self, secret: &str) {
        let Some(resources) = &self.resources else {
            return;
        };
        let waiting: Vec<String> = (resources.known.iter())
            .filter(|(_, k)| k.spec.pull_secret.as_deref() == Some(secret))
            .filter(|(name, _)| match resources.pull_of(name) {
                Pull::Failed { reason, .. } => CREDENTIAL_REASONS.contains(&reason),
                _ => false,
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in waiting {
            tracing::info!(plugin = %name, secret, "its pull Secret changed: pulling again now");
            self.begin_resource_load(&name);
        }
    }

    fn resource_applied(&mut self, plugin: WasmPlugin) {
        let name = plugin.name_any();
        let generation = plugin.metadata.generation;
        if let Err(rule) = wcm_core::plugin::name::check(&name) {
            let why = format!(
                "the name {:?} cannot be a plugin's: {rule}",
                wcm_core::logs::shorten(&name)
            );
            return self.refuse_resource(&name, generation, "InvalidName", why);
        }
        let Some(resources) = &mut self.resources else {
            return;
        };
        let previous = resources.known.remove(&name);
        // A spec change (or a resource refused until now) starts its load afresh; our
        // own status write does not.
        let spec_changed =
            (previous.as_ref()).is_none_or(|k| k.spec != plugin.spec || k.refused.is_some());
        let running = previous.as_ref().and_then(|p| p.running.clone());
        let known = Known {
            spec: plugin.spec.clone(),
            generation,
            status: plugin.status.clone(),
            retry: previous.filter(|_| !spec_changed).and_then(|p| p.retry),
            running: running.filter(|_| !plugin.spec.paused),
            refused: None,
        };
        resources.known.insert(name.clone(), known);
        if !spec_changed {
            return;
        }
        let key = key_of(&name);
        if plugin.spec.paused {
            tracing::info!(plugin = %name, "WasmPlugin paused; stopping the plugin");
            self.stop_slot(&key);
            self.write_status(&name);
            return;
        }
        self.begin_resource_load(&name);
    }

    fn resource_deleted(&mut self, name: &str) {
        let Some(resources) = &mut self.resources else {
            return;
        };
        if resources.known.remove(name).is_none() {
            return;
        }
        resources
            .pulls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        tracing::info!(plugin = %name, "WasmPlugin deleted; stopping the plugin");
        self.stop_slot(&key_of(name));
    }

    /// After a (re)list: resources deleted while the watch was down are stopped.
    fn resources_listed(&mut self, names: &BTreeSet<String>) {
        let Some(resources) = &self.resources else {
            return;
        };
        let gone: Vec<String> = (resources.known.keys())
            .filter(|name| !names.contains(*name))
            .cloned()
            .collect();
        for name in gone {
            self.resource_deleted(&name);
        }
    }

    /// Starts fetching and loading `WasmPlugin` `name` in a task of its own, unless a
    /// plugin file holds its identity.
    fn begin_resource_load(&mut self, name: &str) {
        let key = key_of(name);
        let file = format!("{name}.wasm");
        if self.files.known(&file) {
            let reason = format!("the identity {name} is taken by the plugin file {file}");
            tracing::error!(plugin = %name, reason, "WasmPlugin refused");
            self.table.set(PluginStatus::failed(&key, &reason));
            self.write_status(name);
            return;
        }
        let Some(resources) = &self.resources else {
            return;
        };
        let Some(known) = resources.known.get(name) else {
            return;
        };
        let source = Source::Resource(Box::new(FromResource {
            name: name.to_string(),
            spec: known.spec.clone(),
            pinned: known.status.as_ref().and_then(|s| s.image.clone()),
            fetcher: resources.fetcher.clone(),
            pulls: resources.pulls.clone(),
        }));
        self.drop_next(&key);
        let job = LoadJob {
            source,
            file: key.clone(),
            running_hash: self.files.running(&key).map(|r| r.hash.clone()),
        };
        self.spawn_load(job);
    }

    /// After a resource's load settled (`started`: its version now runs): schedules a
    /// retry of a failed pull, and writes its status.
    pub(super) fn resource_settled(&mut self, key: &str, started: bool) {
        let Some(name) = key.strip_prefix(WASMPLUGIN_ROW) else {
            return;
        };
        let Some(resources) = &mut self.resources else {
            return;
        };
        let pull = resources.pull_of(name);
        let failed = matches!(pull, Pull::Failed { .. });
        if let Some(known) = resources.known.get_mut(name) {
            if let (true, Pull::Done { pinned, digest, .. }) = (started, &pull) {
                known.running = Some((pinned.clone(), digest.clone()));
            }
            known.retry = match (failed, known.retry) {
                (false, _) => None,
                (true, None) => Some((Instant::now() + FIRST_PULL_PAUSE, FIRST_PULL_PAUSE * 2)),
                (true, Some((_, pause))) => {
                    Some((Instant::now() + pause, (pause * 2).min(MAX_PULL_PAUSE)))
                }
            };
        }
        self.write_status(name);
    }

    /// Tries again every pull that failed, now: this replica has just come to act for
    /// its plugins (it took the Lease), and a pull backed off for minutes must not
    /// hold up the plugin it now runs.
    pub(super) fn retry_pulls_now(&mut self) {
        let failed: Vec<String> = match &self.resources {
            Some(resources) => (resources.known.iter())
                .filter(|(_, k)| k.retry.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
            None => return,
        };
        for name in failed {
            tracing::info!(plugin = %name, "this replica leads now: pulling again at once");
            self.begin_resource_load(&name);
        }
    }

    /// Tries again the pulls that failed and are due.
    pub(super) fn retry_pulls(&mut self) {
        let due = match &self.resources {
            Some(resources) => resources.due(Instant::now()),
            None => return,
        };
        for name in due {
            if let Some(known) = (self.resources.as_mut()).and_then(|r| r.known.get_mut(&name)) {
                known.retry = known
                    .retry
                    .map(|(_, pause)| (Instant::now() + pause, pause));
            }
            self.begin_resource_load(&name);
        }
    }
}
