//! The manager: runs the plugins of one directory and follows the directory as files
//! are added, replaced and removed, keeping one bad file from affecting the others.
//!
//! The manager's loop only coordinates. Loading a file (compiling can take seconds
//! for a Python or JavaScript plugin; an upgrade waits for its informers' first
//! list) runs as a task of its own, so files load side by side, each plugin starts
//! as soon as it is ready, and a signal or a lost Lease is noticed at once. One file
//! has at most one load in flight: a newer change of the file replaces it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use wcm_core::rights::access::AccessReviewer;
use wcm_core::rights::identity::PluginIdentities;

use crate::controller::{ControllerContext, Health, PluginController, StartError};
use crate::leader::Leadership;
use crate::probes::Probes;
use crate::status::PluginStatus;
use crate::status::PluginTable;
use crate::watcher::{DirWatcher, FileChange, WatchError};
use load::{LoadJob, LoadOutcome, Source};
use slot::Files;
use wcm_core::config::ManagerConfig;
use wcm_core::kube::informer::InformerRegistry;
use wcm_core::metrics::Metrics;
use wcm_core::rights::changes::RbacChanges;
use wcm_core::runtime::{LoadError, Runtime};

mod health_reports;
mod load;
mod rbac_changes;
mod resource_status;
mod resources;
mod slot;
mod start;
pub(crate) mod state_events;
mod wait_for;
mod waiting;

/// How often the health of running plugins is brought into the table and metrics.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// Why the manager itself could not start (a plugin failing is not such a reason).
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The Wasm engine could not be set up.
    #[error("cannot set up the Wasm runtime: {0}")]
    Runtime(String),
    /// The plugins directory cannot be listed.
    #[error("cannot read plugins directory {dir}: {source}")]
    PluginsDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The plugins directory cannot be watched.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The registry client for `WasmPlugin`s cannot be set up (a CA file).
    #[error(transparent)]
    Registry(#[from] wcm_core::registry::RegistryError),
    /// A key `WasmPlugin`s must be signed by cannot be read.
    #[error(transparent)]
    VerifyKey(#[from] wcm_core::registry::SignatureError),
}

/// Why one plugin file is not running (or not upgraded).
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// It could not be loaded or did not register.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Its registration could not be started.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Its settings file cannot be used.
    #[error(transparent)]
    Settings(#[from] wcm_core::runtime::settings::SettingsError),
    /// Its `WasmPlugin`'s component could not be fetched.
    #[error(transparent)]
    Fetch(#[from] crate::wasmplugin::FetchError),
}

/// A file whose plugin runs.
struct Running {
    controller: PluginController,
    hash: String,
    /// The health last written into the table.
    health: Health,
}

/// Runs the plugins of one directory.
pub struct Manager {
    config: ManagerConfig,
    runtime: Arc<Runtime>,
    ctx: ControllerContext,
    /// Each plugin file: its running version, and what its newest one is doing.
    files: Files,
    table: PluginTable,
    watcher: DirWatcher,
    /// Load tasks in flight, each returning its file name with the outcome.
    loads: JoinSet<(String, LoadOutcome)>,
    /// Plugins being stopped (removed or replaced), drained in the background.
    stopping: JoinSet<()>,
    /// Files of the first scan still loading, until none is; if then nothing runs,
    /// the log says so once.
    first_scan: Option<usize>,
    /// What `/readyz` answers, kept current by the health tick.
    probes: Probes,
    /// Changes of RBAC that concern plugins' accounts, when their rights are reviewed.
    rbac: Option<RbacChanges>,
    /// The host's `WasmPlugin`s, when it follows them (`--wasm-plugin-namespace`).
    resources: Option<resources::Resources>,
    /// Whether this replica acted for every plugin at the last health tick.
    leading: bool,
}

impl Manager {
    /// Sets up the runtime and starts loading every plugin file already in the
    /// directory; the loads finish in [`Manager::run`]. Plugins start their
    /// informers at once; each reconciles only while its gate of `leader` is open,
    /// so a standby keeps warm caches and takes over without relisting.
    pub async fn start(
        config: ManagerConfig,
        identities: PluginIdentities,
        metrics: Arc<Metrics>,
        table: PluginTable,
        leader: Leadership,
        probes: Probes,
    ) -> Result<Manager, ManagerError> {
        let runtime = Runtime::new(config.limits.clone(), config.compile_cache.as_deref())
            .map_err(|e| ManagerError::Runtime(wcm_core::runtime::chain(&e)))?
            .with_compile_cache_max(config.compile_cache_max_bytes);
        let reviewer = (identities.accounts()).map(|accounts| {
            AccessReviewer::new(identities.host().clone(), accounts.clone(), metrics.clone())
        });
        let ctx = ControllerContext {
            reviewer,
            review_every: config.access_review_interval,
            registry: Arc::new(
                InformerRegistry::new(identities.host().clone(), metrics.clone())
                    .reporting(&config.instance),
            ),
            metrics,
            identities,
            instance: config.instance.clone(),
            max_concurrent_reconciles: config.limits.max_concurrent_reconciles,
            retry: config.retry,
            sync_timeout: config.sync_timeout,
            leader,
            budgets: config.budgets.clone(),
            recorders: config.recorders.clone(),
        };
        // Watch first, then scan: a file added meanwhile is loaded twice at worst
        // (the second time it is found unchanged), never missed.
        let watcher = DirWatcher::start(&config.plugins_dir, config.settle)?;
        let files = plugin_files(&config.plugins_dir)?;
        let rbac = rbac_changes::watch_rbac(&ctx).await;
        let resources = match &config.wasm_plugins {
            Some(source) => Some(resources::Resources::start(
                source,
                ctx.identities.host().clone(),
                config.limits.max_plugin_file_bytes,
                &ctx.metrics,
            )?),
            None => None,
        };
        let mut manager = Manager {
            runtime: Arc::new(runtime),
            ctx,
            files: Files::default(),
            table,
            watcher,
            loads: JoinSet::new(),
            stopping: JoinSet::new(),
            first_scan: Some(files.len()),
            probes,
            rbac,
            resources,
            leading: false,
            config,
        };
        for path in files {
            manager.begin_load(&path);
        }
        manager.warn_if_idle();
        Ok(manager)
    }

    /// Plugin files being loaded now.
    pub fn loading(&self) -> usize {
        self.files.loads()
    }

    /// Follows the plugins directory, finishes loads and keeps the table current
    /// until `stop` resolves, then stops every plugin and returns what `stop`
    /// returned (`None` if the directory watch ended first).
    pub async fn run<T>(mut self, stop: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(stop);
        let mut retry = tokio::time::interval(self.config.missing_kind_retry);
        let mut health = tokio::time::interval(HEALTH_EVERY);
        let reason = loop {
            tokio::select! {
                biased;
                reason = &mut stop => break Some(reason),
                change = self.watcher.next() => match change {
                    Some(change) => self.apply(change),
                    None => break None,
                },
                Some(done) = self.loads.join_next_with_id() => self.finish_load(done),
                Some(_) = self.stopping.join_next() => {}
                _ = retry.tick(), if self.files.all_waiting().next().is_some() => {
                    self.retry_waiting()
                }
                Some(concerned) = rbac_changes::next_change(&mut self.rbac) => {
                    self.rights_changed(&concerned)
                }
                Some(change) = resources::next_change(&mut self.resources) => {
                    self.resource_changed(change)
                }
                _ = health.tick() => {
                    self.refresh_health();
                    self.note_leadership();
                    self.retry_pulls();
                    self.refresh_resource_statuses();
                }
            }
        };
        tracing::info!("shutting down: no new reconciles; waiting for in-flight ones");
        self.shutdown().await;
        reason
    }

    /// Applies one settled change of the directory: a changed file is (re)loaded,
    /// replacing a load of it still in flight; a removed file stops.
    fn apply(&mut self, change: FileChange) {
        match change {
            FileChange::Changed(path) => {
                self.drop_next(&file_name(&path));
                self.begin_load(&path)
            }
            FileChange::Removed(path) => self.stop_slot(&file_name(&path)),
        }
    }

    /// Drops what `file`'s newest version was doing: its load in flight (a newer
    /// change replaces it) or its wait to start.
    fn drop_next(&mut self, file: &str) {
        let (load, waiting) = self.files.changed(file);
        if let Some(waiting) = waiting {
            self.forget_waiting(file, &waiting);
        }
        if let Some(previous) = load {
            previous.abort();
            tracing::debug!(file, "a newer change replaces the load in flight");
        }
    }

    /// Stops everything of `file` (removed, or its resource deleted or paused).
    fn stop_slot(&mut self, file: &str) {
        self.drop_next(file);
        self.remove(file);
    }

    /// Starts loading `path` in a task of its own, unless a `WasmPlugin` holds the
    /// identity its name gives it.
    fn begin_load(&mut self, path: &Path) {
        let file = file_name(path);
        let stem = file.strip_suffix(".wasm").unwrap_or(&file);
        if self.files.known(&resources::key_of(stem)) {
            let reason = format!("the identity {stem} is taken by the WasmPlugin {stem}");
            tracing::error!(file, reason, "plugin file refused");
            self.table.set(PluginStatus::failed(&file, &reason));
            return;
        }
        let job = LoadJob {
            source: Source::File(path.to_path_buf()),
            file: file.clone(),
            running_hash: self.files.running(&file).map(|r| r.hash.clone()),
        };
        self.spawn_load(job);
    }

    /// Runs `job` in a task of its own.
    fn spawn_load(&mut self, job: LoadJob) {
        let file = job.file.clone();
        let (runtime, ctx) = (self.runtime.clone(), self.ctx.clone());
        let task_file = file.clone();
        let handle = self
            .loads
            .spawn(async move { (task_file, load::load(job, runtime, ctx).await) });
        self.files.begin_load(&file, handle, false);
    }

    /// Takes a finished load task's outcome; an aborted (replaced) one is dropped.
    fn finish_load(
        &mut self,
        done: Result<(tokio::task::Id, (String, LoadOutcome)), tokio::task::JoinError>,
    ) {
        let (id, (file, outcome)) = match done {
            Ok(done) => done,
            Err(e) if e.is_cancelled() => return,
            Err(e) => return tracing::error!(error = %e, "a plugin load task failed"),
        };
        let Some(retry) = self.files.end_load(&file, id) else {
            return; // replaced by a newer load of the same file
        };
        if !retry {
            self.first_scan = self.first_scan.map(|n| n.saturating_sub(1));
        }
        let started = matches!(outcome, LoadOutcome::Ready(_));
        self.settle(&file, outcome, retry);
        self.resource_settled(&file, started);
        self.warn_if_idle();
    }

    /// Notes whether this replica acts for every plugin; once it comes to, the pulls
    /// that failed are tried again at once.
    fn note_leadership(&mut self) {
        let leading = self.ctx.leader.leads_all();
        if leading && !self.leading {
            self.retry_pulls_now();
        }
        self.leading = leading;
    }

    /// Once the first scan's files are all loaded (or failed), warns if nothing runs.
    fn warn_if_idle(&mut self) {
        if self.first_scan != Some(0) {
            return;
        }
        self.first_scan = None;
        let idle = self.files.all_running().next().is_none();
        if idle && self.files.all_waiting().next().is_none() {
            tracing::warn!(dir = %self.config.plugins_dir.display(), "no plugin is running");
        }
    }

    /// Stops the plugin of a removed file: no new reconciles; in-flight ones finish
    /// or are cut at their deadline; informers no one else uses are released.
    fn remove(&mut self, file: &str) {
        self.table.remove(file);
        let Some(running) = self.files.stop(file) else {
            return;
        };
        let reg = running.controller.registration().clone();
        tracing::info!(file, plugin = %reg.name, version = %reg.version,
            "plugin file removed; stopping the plugin");
        let (file, hash) = (file.to_string(), running.hash);
        self.stop_in_background(running.controller, move || {
            tracing::info!(file, plugin = %reg.name, version = %reg.version,
                hash = %short(&hash), "plugin removed");
        });
    }

    /// Lets `controller`'s in-flight reconciles finish (within the reconcile
    /// deadline) without holding up the loop, then calls `done`.
    fn stop_in_background(
        &mut self,
        controller: PluginController,
        done: impl FnOnce() + Send + 'static,
    ) {
        let grace = self.config.limits.reconcile_timeout;
        self.stopping.spawn(async move {
            controller.stop(grace).await;
            done();
        });
    }

    /// Stops every plugin: loads in flight are dropped, no new reconciles start,
    /// in-flight ones get the grace period.
    pub async fn shutdown(mut self) {
        self.loads.shutdown().await;
        let grace = self.config.shutdown_grace;
        let stops = (self.files.stop_all().into_iter()).map(|r| r.controller.stop(grace));
        futures::future::join_all(stops).await;
        while self.stopping.join_next().await.is_some() {}
    }
}

/// The first 12 hex digits of a content hash, for log lines.
fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Plugin files of `dir`, sorted.
fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, ManagerError> {
    wcm_core::plugin::file::plugin_files(dir).map_err(|source| ManagerError::PluginsDir {
        dir: dir.to_path_buf(),
        source,
    })
}
