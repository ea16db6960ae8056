//! The slow half of loading a plugin file, run as a task of its own so the manager's
//! loop stays free: read, compile (on a blocking thread) or take from the compile
//! cache, `register`, check the registration and acquire its informers (synced, when
//! it replaces a running version). The manager then starts or swaps it in one step.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::wait_for::WaitFor;
use crate::controller::{ControllerContext, Prepared, StartError};
use crate::wasmplugin::{Fetcher, Pull, Pulls, WasmPluginSpec};
use wcm_core::contract::Registration;
use wcm_core::loading::{ReadError, SettingsFrom, Version};
use wcm_core::metrics::LoadStepLabels;
use wcm_core::plugin::file as plugin_file;
use wcm_core::runtime::{LoadError, Loaded, Runtime};

use super::PluginError;

/// Where a version comes from.
pub(super) enum Source {
    /// A file of the plugins directory.
    File(PathBuf),
    /// A `WasmPlugin`: its component fetched (from the disk, else pulled), its
    /// settings from its spec.
    Resource(Box<FromResource>),
}

/// A `WasmPlugin` to load, and where its pull is reported.
pub(super) struct FromResource {
    pub name: String,
    pub spec: WasmPluginSpec,
    /// The reference its status pinned, if any.
    pub pinned: Option<String>,
    pub fetcher: Fetcher,
    pub pulls: Pulls,
}

/// What a load task is asked to do.
pub(super) struct LoadJob {
    /// Where the version comes from.
    pub source: Source,
    /// Its key: its name in the plugins directory, or `wasmplugin/<name>`.
    pub file: String,
    /// The content hash of the version running from this file, if any: the same
    /// bytes again are nothing to do, and a new version waits for its informers'
    /// first list before it takes over.
    pub running_hash: Option<String>,
    /// Load it even if its bytes are the running version's: that version's parked
    /// code is gone from the compile cache.
    pub reload: bool,
}

/// A loaded plugin ready to start or take over.
pub(super) struct Ready {
    pub loaded: Loaded,
    pub prepared: Prepared,
    /// Time `register` took.
    pub register: Duration,
    /// When the load began.
    pub began: Instant,
}

impl Ready {
    /// Adds the time each step of this load took to `wcm_plugin_load_seconds`.
    pub(super) fn observe(&self, metrics: &wcm_core::metrics::Metrics) {
        let loaded = &self.loaded;
        let steps = [
            ("read", loaded.read),
            ("compile_wait", loaded.compile_wait),
            ("compile", loaded.compile),
            ("link", loaded.link),
            ("register", self.register),
            ("review", self.prepared.review_took()),
        ];
        for (step, took) in steps {
            let labels = LoadStepLabels {
                step: step.to_string(),
            };
            metrics
                .load_seconds
                .get_or_create(&labels)
                .observe(took.as_secs_f64());
        }
    }
}

/// A registered plugin that cannot start yet: a kind is not served, or its rights
/// are missing or cannot be reviewed.
pub(super) struct Pending {
    pub loaded: Loaded,
    pub registration: Registration,
    pub why: WaitFor,
}

/// How a load task ended.
pub(super) enum LoadOutcome {
    /// The file holds the version already running.
    Unchanged { hash: String },
    /// Loaded, registered and prepared.
    Ready(Box<Ready>),
    /// Registered, but it cannot start yet.
    Waiting(Box<Pending>),
    /// Not loadable; the running version (if any) stays.
    Failed {
        hash: Option<String>,
        error: PluginError,
    },
}

/// Runs `job`.
pub(super) async fn load(
    job: LoadJob,
    runtime: Arc<Runtime>,
    ctx: ControllerContext,
) -> LoadOutcome {
    let began = Instant::now();
    let max_bytes = runtime.limits().max_plugin_file_bytes;
    let (identity, version) = match read(job.source, max_bytes).await {
        Ok(read) => read,
        Err(failure) => return failure,
    };
    let hash = version.hash.clone();
    if !job.reload && job.running_hash.as_deref() == Some(hash.as_str()) {
        return LoadOutcome::Unchanged { hash };
    }
    let (loaded, registration, register) = match version.register(&runtime, &job.file).await {
        // The operator's name for the plugin, whatever it registered as.
        Ok((loaded, registration, took)) => (loaded, registration.under(&identity), took),
        Err(e) => return failed(Some(hash), e.into()),
    };
    note_if_renamed(&job.file, &registration);
    let replaces = job.running_hash.is_some();
    prepare(loaded, registration, &ctx, replaces, register, began).await
}

/// Checks and prepares a registered plugin: the last step of a load, and the retry
/// of a waiting plugin.
pub(super) async fn prepare(
    loaded: Loaded,
    registration: Registration,
    ctx: &ControllerContext,
    replaces: bool,
    register: Duration,
    began: Instant,
) -> LoadOutcome {
    let why = match Prepared::new(registration.clone(), ctx, replaces).await {
        Ok(prepared) => {
            return LoadOutcome::Ready(Box::new(Ready {
                loaded,
                prepared,
                register,
                began,
            }));
        }
        // A new version that needs a right not granted yet waits for it while the
        // old one runs on (an operator grants the new RBAC after dropping it in).
        Err(StartError::Forbidden(error)) => WaitFor::Rights(error),
        // Otherwise a new version of a running plugin is refused: the old one runs on.
        Err(e) if replaces => return failed(Some(loaded.hash.clone()), e.into()),
        Err(StartError::Discovery(error)) if error.is_not_served() => WaitFor::Kind(error),
        Err(StartError::Review(error)) => WaitFor::Review(error),
        Err(e) => return failed(Some(loaded.hash.clone()), e.into()),
    };
    LoadOutcome::Waiting(Box::new(Pending {
        loaded,
        registration,
        why,
    }))
}

/// The identity and version `source` holds, or the load's failure.
async fn read(source: Source, max_bytes: u64) -> Result<(String, Version), LoadOutcome> {
    match source {
        Source::File(path) => read_file(&path, max_bytes).await,
        Source::Resource(resource) => read_resource(*resource).await,
    }
}

/// A plugin file: its name the identity, its settings beside it.
async fn read_file(path: &Path, max_bytes: u64) -> Result<(String, Version), LoadOutcome> {
    let identity =
        plugin_file::identity(path).map_err(|e| failed(None, LoadError::Read(e).into()))?;
    match Version::read(path, max_bytes, SettingsFrom::Beside).await {
        Ok(version) => Ok((identity, version)),
        Err(ReadError::File(e)) => Err(failed(None, e.into())),
        Err(ReadError::Settings { file_hash, cause }) => Err(failed(Some(file_hash), cause.into())),
    }
}

/// A `WasmPlugin`: its name the identity, its component fetched (the pull reported
/// for its status), its settings from its spec.
async fn read_resource(resource: FromResource) -> Result<(String, Version), LoadOutcome> {
    let FromResource {
        name,
        spec,
        pinned,
        fetcher,
        pulls,
    } = resource;
    let fetched = fetcher.fetch(&spec, pinned.as_deref()).await;
    let pull = match &fetched {
        Ok(f) => Pull::Done {
            pinned: f.pinned.clone(),
            digest: f.fetched.digest.clone(),
            cached: f.fetched.cached,
        },
        Err(e) => Pull::Failed {
            reason: e.reason(),
            message: e.to_string(),
        },
    };
    pulls
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.clone(), pull);
    let fetched = fetched.map_err(|e| failed(None, e.into()))?;
    let version = crate::wasmplugin::version_of(&name, &spec, fetched.fetched.bytes)
        .map_err(|e| failed(None, e.into()))?;
    Ok((name, version))
}

fn failed(hash: Option<String>, error: PluginError) -> LoadOutcome {
    LoadOutcome::Failed { hash, error }
}

/// Says once per load that a plugin registered under another name than the one it
/// runs as: its file's name decides whom it acts as, never its code.
fn note_if_renamed(file: &str, registration: &wcm_core::contract::Registration) {
    if let Some(claimed) = &registration.registered_as {
        let claimed = wcm_core::logs::shorten(claimed);
        tracing::info!(file, plugin = %registration.name, registered_as = ?claimed,
            "the plugin runs under its file's name, not the name it registered: the file's name \
             is its identity (ServiceAccount, field manager, metrics)");
    }
}
