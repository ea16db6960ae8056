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

use wcm_core::rights::access::AccessReviewer;
use wcm_core::rights::identity::PluginIdentities;

use crate::controller::{ControllerContext, StartError};
use crate::leader::Leadership;
use crate::probes::Probes;
use crate::status::PluginTable;
use crate::watcher::{DirWatcher, FileChange, WatchError};
use load::Source;
use plugins::Plugins;
use resources::WasmPlugins;
use rows::Rows;
use tasks::Tasks;
use wcm_core::config::ManagerConfig;
use wcm_core::kube::informer::InformerRegistry;
use wcm_core::metrics::Metrics;
use wcm_core::rights::changes::RbacChanges;
use wcm_core::runtime::worker::CompileWorker;
use wcm_core::runtime::{LoadError, Runtime};

mod followed;
mod load;
mod plugins;
mod rbac_changes;
mod resources;
mod rows;
mod slot;
pub(crate) mod state_events;
mod tasks;
mod wait_for;

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

/// Runs the plugins of one directory, and the host's `WasmPlugin`s.
pub struct Manager {
    /// Every plugin, by file.
    plugins: Plugins,
    watcher: DirWatcher,
    /// What `/readyz` answers, kept current by the health tick.
    probes: Probes,
    /// Changes of RBAC that concern plugins' accounts, when their rights are reviewed.
    rbac: Option<RbacChanges>,
    /// The host's `WasmPlugin`s, when it follows them (`--wasm-plugin-namespace`).
    resources: Option<WasmPlugins>,
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
        let mut runtime = Runtime::new(config.limits.clone(), config.compile_cache.as_deref())
            .map_err(|e| ManagerError::Runtime(wcm_core::runtime::chain(&e)))?
            .with_compile_cache_max(config.compile_cache_max_bytes);
        if let Some(program) = config.compile_worker.clone() {
            runtime = runtime.with_compile_worker(CompileWorker::new(program));
        }
        let ctx = context(&config, identities, metrics, leader);
        // Watch first, then scan: a file added meanwhile is loaded twice at worst
        // (the second time it is found unchanged), never missed.
        let watcher = DirWatcher::start(&config.plugins_dir, config.settle)?;
        let files = plugin_files(&config.plugins_dir)?;
        let rbac = rbac_changes::watch_rbac(&ctx).await;
        let resources = match &config.wasm_plugins {
            Some(source) => Some(WasmPlugins::start(
                source,
                ctx.identities.host().clone(),
                config.limits.max_plugin_file_bytes,
                &ctx.metrics,
            )?),
            None => None,
        };
        let rows = Rows::new(table, ctx.clone(), &config.limits);
        let tasks = Tasks::new(
            Arc::new(runtime),
            ctx.clone(),
            config.limits.reconcile_timeout,
        );
        let plugins = Plugins::new(config, ctx, rows, tasks, files.len());
        let mut manager = Manager {
            plugins,
            watcher,
            probes,
            rbac,
            resources,
            leading: false,
        };
        for path in files {
            manager.begin_load(&path);
        }
        manager.plugins.after_first_scan();
        Ok(manager)
    }

    /// Plugin files being loaded now.
    pub fn loading(&self) -> usize {
        self.plugins.loading()
    }

    /// Follows the plugins directory, finishes loads and keeps the table current
    /// until `stop` resolves, then stops every plugin and returns what `stop`
    /// returned (`None` if the directory watch ended first).
    pub async fn run<T>(mut self, stop: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(stop);
        let mut retry = tokio::time::interval(self.plugins.config.missing_kind_retry);
        let mut health = tokio::time::interval(HEALTH_EVERY);
        let reason = loop {
            tokio::select! {
                biased;
                reason = &mut stop => break Some(reason),
                change = self.watcher.next() => match change {
                    Some(change) => self.apply(change),
                    None => break None,
                },
                done = self.plugins.next_load() => self.load_finished(done),
                _ = retry.tick(), if self.plugins.any_waiting() => self.plugins.retry_waiting(),
                Some(concerned) = rbac_changes::next_change(&mut self.rbac) => {
                    self.plugins.rights_changed(&concerned)
                }
                Some(change) = resources::next_change(&mut self.resources) => {
                    if let Some(resources) = &mut self.resources {
                        resources.changed(change, &mut self.plugins)
                    }
                }
                _ = health.tick() => self.health_tick(),
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
                self.plugins.drop_next(&file_name(&path));
                self.begin_load(&path)
            }
            FileChange::Removed(path) => self.plugins.stop(&file_name(&path)),
        }
    }

    /// Starts loading `path` in a task of its own, unless a `WasmPlugin` holds the
    /// identity its name gives it.
    fn begin_load(&mut self, path: &Path) {
        let file = file_name(path);
        let stem = file.strip_suffix(".wasm").unwrap_or(&file);
        if self.plugins.known(&resources::key_of(stem)) {
            let reason = format!("the identity {stem} is taken by the WasmPlugin {stem}");
            tracing::error!(file, reason, "plugin file refused");
            return self.plugins.refuse(&file, &reason);
        }
        self.plugins.load(&file, Source::File(path.to_path_buf()));
    }

    /// A load finished: its plugin settles, and its resource's status follows.
    fn load_finished(&mut self, done: tasks::LoadDone) {
        let Some((file, started)) = self.plugins.finish_load(done) else {
            return;
        };
        if let Some(resources) = &mut self.resources {
            resources.settled(&file, started, &self.plugins);
        }
    }

    /// Every second: plugins' health into the table and `/readyz`; once this replica
    /// comes to act for every plugin, failed pulls at once, else those due; the
    /// resources' statuses.
    fn health_tick(&mut self) {
        for lost in self.plugins.refresh_health() {
            self.load_again(&lost);
        }
        self.probes.set_ready(self.plugins.readiness());
        let leading = self.plugins.leads_all();
        let newly_leading = leading && !self.leading;
        self.leading = leading;
        let Some(resources) = &mut self.resources else {
            return;
        };
        if newly_leading {
            resources.retry_pulls_now(&mut self.plugins);
        }
        resources.retry_pulls(&mut self.plugins);
        resources.refresh_statuses(&self.plugins);
    }

    /// Loads `file` (a plugin file's name, or a `WasmPlugin`'s key) from its source
    /// again.
    fn load_again(&mut self, file: &str) {
        match (
            file.strip_prefix(crate::status::WASMPLUGIN_ROW),
            &mut self.resources,
        ) {
            (Some(name), Some(resources)) => resources.load_again(name, &mut self.plugins),
            (Some(_), None) => {}
            (None, _) => {
                let path = self.plugins.config.plugins_dir.join(file);
                self.begin_load(&path);
            }
        }
    }

    /// Stops every plugin: loads in flight are dropped, no new reconciles start,
    /// in-flight ones get the grace period.
    pub async fn shutdown(self) {
        self.plugins.shutdown().await;
    }
}

/// What every plugin's controller shares.
fn context(
    config: &ManagerConfig,
    identities: PluginIdentities,
    metrics: Arc<Metrics>,
    leader: Leadership,
) -> ControllerContext {
    let reviewer = (identities.accounts()).map(|accounts| {
        AccessReviewer::new(identities.host().clone(), accounts.clone(), metrics.clone())
    });
    ControllerContext {
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
