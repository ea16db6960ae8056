//! The manager: runs the plugins of one directory and follows the directory as files
//! are added, replaced and removed, keeping one bad file from affecting the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kube::Client;

use crate::bindings::Registration;
use crate::config::ManagerConfig;
use crate::controller::{ControllerContext, PluginController, StartError};
use crate::kube::informer::InformerRegistry;
use crate::leader::LeaderGate;
use crate::metrics::Metrics;
use crate::runtime::{LoadError, Loaded, PluginFile, Runtime};
use crate::status::{PluginStatus, PluginTable};
use crate::watcher::{DirWatcher, FileChange, WatchError, is_plugin_file};
use waiting::Waiting;

mod waiting;

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
    /// Another file already registered this name.
    #[error("plugin name {name:?} is already used by {other}")]
    DuplicateName {
        /// The contested name.
        name: String,
        /// The file that has it.
        other: String,
    },
}

/// A file whose plugin runs.
struct Running {
    controller: PluginController,
    hash: String,
}

/// Runs the plugins of one directory.
pub struct Manager {
    config: ManagerConfig,
    runtime: Arc<Runtime>,
    ctx: ControllerContext,
    running: BTreeMap<String, Running>,
    table: PluginTable,
    watcher: DirWatcher,
    /// Loaded plugins waiting for a kind the API server does not serve yet.
    waiting: BTreeMap<String, Waiting>,
}

impl Manager {
    /// Sets up the runtime and loads every plugin file already in the directory.
    /// Plugins start their informers at once; they reconcile only while `leader` is
    /// open, so a standby keeps warm caches and takes over without relisting.
    pub async fn start(
        config: ManagerConfig,
        client: Client,
        metrics: Arc<Metrics>,
        table: PluginTable,
        leader: LeaderGate,
    ) -> Result<Manager, ManagerError> {
        let runtime = Runtime::new(config.limits.clone(), config.compile_cache.as_deref())
            .map_err(|e| ManagerError::Runtime(crate::runtime::chain(&e)))?;
        let ctx = ControllerContext {
            registry: Arc::new(InformerRegistry::new(client.clone(), metrics.clone())),
            metrics,
            client,
            instance: config.instance.clone(),
            max_concurrent_reconciles: config.limits.max_concurrent_reconciles,
            retry: config.retry,
            sync_timeout: config.sync_timeout,
            leader,
            budgets: config.budgets.clone(),
        };
        // Watch first, then scan: a file added meanwhile is loaded twice at worst
        // (the second time it is found unchanged), never missed.
        let watcher = DirWatcher::start(&config.plugins_dir, config.settle)?;
        let mut manager = Manager {
            runtime: Arc::new(runtime),
            ctx,
            running: BTreeMap::new(),
            table,
            watcher,
            waiting: BTreeMap::new(),
            config,
        };
        for path in plugin_files(&manager.config.plugins_dir)? {
            manager.load(&path).await;
        }
        if manager.running.is_empty() {
            tracing::warn!(dir = %manager.config.plugins_dir.display(), "no plugin is running");
        }
        Ok(manager)
    }

    /// Watches the plugins directory and applies every change until `stop` resolves,
    /// then stops every plugin and returns what `stop` returned (`None` if the
    /// directory watch ended first).
    pub async fn run<T>(mut self, stop: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(stop);
        let mut retry = tokio::time::interval(self.config.missing_kind_retry);
        let reason = loop {
            tokio::select! {
                reason = &mut stop => break Some(reason),
                change = self.watcher.next() => match change {
                    Some(change) => self.apply(change).await,
                    None => break None,
                },
                _ = retry.tick(), if !self.waiting.is_empty() => self.retry_waiting().await,
            }
        };
        tracing::info!("shutting down: no new reconciles; waiting for in-flight ones");
        self.shutdown().await;
        reason
    }

    /// Applies one settled change of the directory.
    pub async fn apply(&mut self, change: FileChange) {
        let (FileChange::Changed(path) | FileChange::Removed(path)) = &change;
        self.waiting.remove(&file_name(path));
        match change {
            FileChange::Changed(path) => self.load(&path).await,
            FileChange::Removed(path) => self.remove(&file_name(&path)).await,
        }
    }

    /// Loads a file: starts it, or upgrades the version running from it. Failures
    /// are logged with the file name and recorded; a running version keeps running.
    pub async fn load(&mut self, path: &Path) {
        let file = file_name(path);
        let started = Instant::now();
        let read = match PluginFile::read(path).await {
            Ok(read) => read,
            Err(e) => return self.failed(&file, None, &PluginError::Load(e)),
        };
        if self.running.get(&file).is_some_and(|r| r.hash == read.hash) {
            tracing::debug!(file, hash = %short(&read.hash), "unchanged; nothing to do");
            return;
        }
        let hash = read.hash.clone();
        let loaded = match self.runtime.prepare(read).await {
            Ok(loaded) => loaded,
            Err(e) => return self.failed(&file, Some(&hash), &PluginError::Load(e)),
        };
        let registered = Instant::now();
        let registration = match loaded.code.register(&file).await {
            Ok(r) => r,
            Err(e) => {
                let error = PluginError::Load(LoadError::Register(e));
                return self.failed(&file, Some(&hash), &error);
            }
        };
        let register = registered.elapsed();
        let result = match self.running.contains_key(&file) {
            true => self.upgrade(&file, &loaded, registration.clone()).await,
            false => (self.start_new(&file, &loaded, registration.clone()).await).map(|_| None),
        };
        match result {
            Err(PluginError::Start(StartError::Discovery(e)))
                if e.is_not_served() && !self.running.contains_key(&file) =>
            {
                self.wait_for_kind(&file, &loaded, registration, &e);
            }
            Err(e) => self.failed(&file, Some(&hash), &e),
            Ok(previous) => {
                let origin = format!("{:?}", loaded.origin).to_lowercase();
                let what = if previous.is_some() {
                    "plugin upgraded"
                } else {
                    "plugin loaded"
                };
                tracing::info!(file, plugin = %registration.name, version = %registration.version,
                    previous = %previous.as_deref().unwrap_or("-"), hash = %short(&loaded.hash), origin,
                    read = ?loaded.read, compile = ?loaded.compile, link = ?loaded.link,
                    register = ?register, total = ?started.elapsed(), "{what}");
                self.table.set(PluginStatus::running(
                    &file,
                    &registration.name,
                    &registration.version,
                    &loaded.hash,
                ));
            }
        }
    }

    /// Starts `registration` for `file`; returns the entry it displaced, if any.
    async fn start_new(
        &mut self,
        file: &str,
        loaded: &Loaded,
        registration: Registration,
    ) -> Result<Option<Running>, PluginError> {
        self.check_unique(file, &registration.name)?;
        let controller =
            PluginController::start(loaded.code.clone(), registration, &self.ctx).await?;
        let hash = loaded.hash.clone();
        Ok(self
            .running
            .insert(file.into(), Running { controller, hash }))
    }

    /// Hands a running file's queue to its new version; returns the old version.
    /// A new plugin name is a replacement: the new one starts, then the old one stops.
    async fn upgrade(
        &mut self,
        file: &str,
        loaded: &Loaded,
        registration: Registration,
    ) -> Result<Option<String>, PluginError> {
        self.check_unique(file, &registration.name)?;
        let Some(running) = self.running.get_mut(file) else {
            return self
                .start_new(file, loaded, registration)
                .await
                .map(|_| None);
        };
        let old = running.controller.registration().clone();
        if old.name == registration.name {
            running
                .controller
                .upgrade(loaded.code.clone(), registration)
                .await?;
            running.hash = loaded.hash.clone();
        } else if let Some(replaced) = self.start_new(file, loaded, registration).await? {
            replaced
                .controller
                .stop(self.config.limits.reconcile_timeout)
                .await;
        }
        Ok(Some(format!("{} {}", old.name, old.version)))
    }

    fn check_unique(&self, file: &str, name: &str) -> Result<(), PluginError> {
        let other = self
            .running
            .iter()
            .find(|(f, r)| *f != file && r.controller.registration().name == name);
        match other {
            Some((other, _)) => Err(PluginError::DuplicateName {
                name: name.into(),
                other: other.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records a failure: a running version keeps running and its row notes the
    /// refused upgrade; otherwise the file is marked failed.
    fn failed(&self, file: &str, hash: Option<&str>, error: &PluginError) {
        let hash = hash.map_or("-", short);
        if let Some(running) = self.running.get(file) {
            let reg = running.controller.registration();
            tracing::error!(file, hash, %error, running = %format!("{} {}", reg.name, reg.version),
                running_hash = %short(&running.hash),
                "plugin upgrade failed; the running version keeps running");
            self.table
                .set_reason(file, Some(format!("upgrade refused: {error}")));
        } else {
            tracing::error!(file, hash, %error, "plugin failed to load");
            self.table
                .set(PluginStatus::failed(file, &error.to_string()));
        }
    }

    /// Stops the plugin of a removed file: no new reconciles; in-flight ones finish
    /// or are cut at their deadline; informers no one else uses are released.
    pub async fn remove(&mut self, file: &str) {
        self.table.remove(file);
        let Some(running) = self.running.remove(file) else {
            return;
        };
        let reg = running.controller.registration().clone();
        running
            .controller
            .stop(self.config.limits.reconcile_timeout)
            .await;
        tracing::info!(file, plugin = %reg.name, version = %reg.version,
            hash = %short(&running.hash), "plugin removed");
    }

    /// Names of running plugins by file name.
    pub fn running(&self) -> BTreeMap<String, String> {
        self.running
            .iter()
            .map(|(f, r)| (f.clone(), r.controller.registration().name.clone()))
            .collect()
    }

    /// The shared informers.
    pub fn registry(&self) -> &Arc<InformerRegistry> {
        &self.ctx.registry
    }

    /// Stops every plugin: no new reconciles, in-flight ones get the grace period.
    pub async fn shutdown(self) {
        let grace = self.config.shutdown_grace;
        let stops = self.running.into_values().map(|r| r.controller.stop(grace));
        futures::future::join_all(stops).await;
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
    let err = |source| ManagerError::PluginsDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let path = entry.map_err(err)?.path();
        if is_plugin_file(&path) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
