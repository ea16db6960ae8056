//! `WasmPlugin`s in the manager: each resource is a plugin slot beside the directory's
//! files, keyed `wasmplugin/<name>`, whose version comes from a registry instead of
//! the disk, and whose status is written as a projection of its pull and its row of
//! the plugin table.
//!
//! The resource's name is the plugin's identity; a file of the same identity and a
//! resource never both run: whichever comes second is refused, saying which holds it.
//! A failed pull is tried again with a doubling pause (5 s to 5 min) while the running
//! version, if any, runs on. Only the leading replica pulls and writes status; a
//! standby loads a pinned digest it already holds on disk, so it takes over warm.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::Manager;
use super::load::{FromResource, LoadJob, Source};
use crate::config::WasmPluginSource;
use crate::registry::{PulledPlugins, Registry, SignatureError, TrustedKey};
use crate::status::{PluginStatus, WASMPLUGIN_ROW};
use crate::wasmplugin::{
    Facts, Fetcher, Pull, Pulls, ResourceChange, WasmPlugin, WasmPluginSpec, WasmPluginStatus,
    changes, status_of,
};

/// The table key of `WasmPlugin` `name`.
pub(super) fn key_of(name: &str) -> String {
    format!("{WASMPLUGIN_ROW}{name}")
}

/// First pause before a failed pull is tried again; doubled up to [`MAX_PULL_PAUSE`].
const FIRST_PULL_PAUSE: Duration = Duration::from_secs(5);
/// Longest pause between tries of a failing pull.
const MAX_PULL_PAUSE: Duration = Duration::from_secs(300);

/// One resource as last seen.
struct Known {
    spec: WasmPluginSpec,
    generation: Option<i64>,
    /// Its status as last seen or written: the pin, and conditions' transition times.
    status: Option<WasmPluginStatus>,
    /// When a failed pull is tried again, and the pause after that.
    retry: Option<(Instant, Duration)>,
    /// The pinned reference and digest of the version running.
    running: Option<(String, String)>,
}

/// The manager's view of the host's `WasmPlugin`s.
pub(super) struct Resources {
    fetcher: Fetcher,
    api: Api<WasmPlugin>,
    changes: BoxStream<'static, ResourceChange>,
    known: BTreeMap<String, Known>,
    pulls: Pulls,
}

impl Resources {
    /// Follows the `WasmPlugin`s of `source`'s namespace as `client`, pulling
    /// components of at most `max_bytes`.
    pub(super) fn start(
        source: &WasmPluginSource,
        client: kube::Client,
        max_bytes: u64,
    ) -> Result<Resources, super::ManagerError> {
        let registry = Registry::new(&source.ca_files)?;
        let store = PulledPlugins::new(&source.pulled_dir).with_max_bytes(source.pulled_max_bytes);
        let namespace = &source.namespace;
        let keys = (source.verify_keys.iter())
            .map(|path| read_key(path))
            .collect::<Result<_, _>>()?;
        let fetcher =
            Fetcher::new(registry, store, client.clone(), namespace, max_bytes).requiring(keys);
        Ok(Resources {
            fetcher,
            api: Api::namespaced(client.clone(), namespace),
            changes: changes(client, namespace).boxed(),
            known: BTreeMap::new(),
            pulls: Pulls::default(),
        })
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

    fn pull_of(&self, name: &str) -> Pull {
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
            ResourceChange::Deleted(name) => self.resource_deleted(&name),
            ResourceChange::Listed(names) => self.resources_listed(&names),
        }
    }

    fn resource_applied(&mut self, plugin: WasmPlugin) {
        let Some(resources) = &mut self.resources else {
            return;
        };
        let name = plugin.name_any();
        let generation = plugin.metadata.generation;
        let spec_changed = (resources.known.get(&name)).is_none_or(|k| k.spec != plugin.spec);
        let previous = resources.known.remove(&name);
        let running = previous.as_ref().and_then(|p| p.running.clone());
        let known = Known {
            spec: plugin.spec.clone(),
            generation,
            status: plugin.status.clone(),
            // A spec change starts its pulls afresh; our own status write does not.
            retry: previous.filter(|_| !spec_changed).and_then(|p| p.retry),
            running: running.filter(|_| !plugin.spec.paused),
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
            leading: self.ctx.leader.pulls(),
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

    /// Writes every resource's status that changed (health moves rows without a load).
    pub(super) fn refresh_resource_statuses(&mut self) {
        let names: Vec<String> = match &self.resources {
            Some(resources) => resources.known.keys().cloned().collect(),
            None => return,
        };
        for name in names {
            self.write_status(&name);
        }
    }

    /// Writes `name`'s status if it changed, while this replica acts for it (a
    /// standby's view is the holder's to report).
    fn write_status(&mut self, name: &str) {
        if !self.ctx.leader.reports_on(name) {
            return;
        }
        let row = self.table.row(&key_of(name));
        let Some(resources) = &mut self.resources else {
            return;
        };
        let pull = resources.pull_of(name);
        let Some(known) = resources.known.get_mut(name) else {
            return;
        };
        let facts = Facts {
            generation: known.generation,
            paused: known.spec.paused,
            pull: &pull,
            running: known.running.as_ref(),
            row: row.as_ref(),
        };
        // Whole seconds, as the API server keeps them, so a status read back equals it.
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let now = k8s_openapi::jiff::Timestamp::from_second(now).unwrap_or_default();
        let status = status_of(&facts, known.status.as_ref(), now);
        if known.status.as_ref() == Some(&status) {
            return;
        }
        known.status = Some(status.clone());
        let (api, name) = (resources.api.clone(), name.to_string());
        tokio::spawn(async move {
            let patch = Patch::Merge(serde_json::json!({ "status": status }));
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
            {
                tracing::warn!(plugin = %name, error = %e, "could not write the WasmPlugin's status");
            }
        });
    }
}
