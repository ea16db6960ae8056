//! The manager: loads every plugin in the plugins directory and runs it, keeping one
//! bad plugin from affecting the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::Client;

use crate::config::ManagerConfig;
use crate::controller::{ControllerContext, PluginController, StartError};
use crate::kube::informer::InformerRegistry;
use crate::metrics::Metrics;
use crate::runtime::{LoadError, Runtime};

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
}

/// Why one plugin file is not running.
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

/// Runs the plugins of one directory.
pub struct Manager {
    config: ManagerConfig,
    runtime: Arc<Runtime>,
    ctx: ControllerContext,
    /// Running plugins by file name.
    running: BTreeMap<String, PluginController>,
    /// Files that failed, with the reason, by file name.
    failed: BTreeMap<String, String>,
}

impl Manager {
    /// Sets up the runtime and loads every `*.wasm` file in the plugins directory.
    pub async fn start(
        config: ManagerConfig,
        client: Client,
        metrics: Arc<Metrics>,
    ) -> Result<Manager, ManagerError> {
        let runtime = Runtime::new(config.limits.clone())
            .map_err(|e| ManagerError::Runtime(crate::runtime::chain(&e)))?;
        let ctx = ControllerContext {
            registry: Arc::new(InformerRegistry::new(client.clone(), metrics.clone())),
            metrics,
            client,
            instance: config.instance.clone(),
            max_concurrent_reconciles: config.limits.max_concurrent_reconciles,
            retry: config.retry,
        };
        let mut manager = Manager {
            runtime: Arc::new(runtime),
            ctx,
            running: BTreeMap::new(),
            failed: BTreeMap::new(),
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

    /// Loads one file; a failure is logged with the file name and kept for status.
    pub async fn load(&mut self, path: &Path) {
        let file = file_name(path);
        match self.try_load(path, &file).await {
            Ok(controller) => {
                let reg = &controller.registration;
                tracing::info!(file, plugin = %reg.name, version = %reg.version,
                    watches = reg.watches.len(), "plugin loaded");
                self.failed.remove(&file);
                self.running.insert(file, controller);
            }
            Err(error) => {
                tracing::error!(file, %error, "plugin failed to load");
                self.failed.insert(file, error.to_string());
            }
        }
    }

    async fn try_load(&self, path: &Path, file: &str) -> Result<PluginController, PluginError> {
        let code = self.runtime.load(path).await?;
        let registration = code.register(file).await.map_err(LoadError::Register)?;
        if let Some((other, _)) = self
            .running
            .iter()
            .find(|(f, c)| *f != file && c.registration.name == registration.name)
        {
            return Err(PluginError::DuplicateName {
                name: registration.name,
                other: other.clone(),
            });
        }
        Ok(PluginController::start(code, registration, &self.ctx).await?)
    }

    /// Running plugins by file name.
    pub fn running(&self) -> &BTreeMap<String, PluginController> {
        &self.running
    }

    /// Failed files with their reason.
    pub fn failed(&self) -> &BTreeMap<String, String> {
        &self.failed
    }

    /// The shared informers.
    pub fn registry(&self) -> &Arc<InformerRegistry> {
        &self.ctx.registry
    }

    /// Stops every plugin: no new reconciles, in-flight ones get the grace period.
    pub async fn shutdown(self) {
        let grace = self.config.shutdown_grace;
        let stops = self.running.into_values().map(|c| c.stop(grace));
        futures::future::join_all(stops).await;
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// `*.wasm` files of `dir`, sorted; hidden files are skipped.
fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, ManagerError> {
    let err = |source| ManagerError::PluginsDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let path = entry.map_err(err)?.path();
        let name = file_name(&path);
        if path.extension().is_some_and(|e| e == "wasm") && !name.starts_with('.') {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
