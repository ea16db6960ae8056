//! One way a plugin file becomes registered code, for the manager, `rbac` and the
//! test kit alike: its bytes (a bounded regular file inside its directory), its settings (beside it, or given), its version (the
//! bytes' hash, and the settings'), then its code compiled or taken from the compile
//! cache, pre-linked, and asked for its registration. Checking the registration is
//! the caller's next step, against the plugin's own budget in the manager and the
//! defaults offline ([`load_registered_with`], [`registrations`] for `rbac`); so is its identity, the file's name
//! (`plugin::file::identity`), which the test kit does not need (it runs whatever
//! file cargo built).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::budget::Budget;
use crate::config::Limits;
use crate::contract::Registration;
use crate::plugin::file::{self as plugin_file, plugin_files};
use crate::plugin::{InvalidRegistration, validate};
use crate::runtime::settings::{self, Settings, SettingsError};
use crate::runtime::{CallError, LoadError, Loaded, PluginCode, PluginFile, Runtime, chain};

/// Where a plugin's settings come from.
#[derive(Debug)]
pub enum SettingsFrom {
    /// The `NAME.settings.json` or `.yaml` beside its file, if there is one.
    Beside,
    /// These, whatever is beside the file (`test --settings`).
    Given(Option<Settings>),
}

/// A plugin file read, its version known, nothing compiled yet.
#[derive(Debug)]
pub struct Version {
    /// The file's bytes and their hash.
    pub file: PluginFile,
    /// Its settings, if any.
    pub settings: Option<Settings>,
    /// The version's hash: the file's, with `+` and the settings' when there are
    /// some, so a change of either is a new version.
    pub hash: String,
}

/// Why a plugin file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file itself.
    #[error(transparent)]
    File(#[from] LoadError),
    /// Its settings, beside a file whose bytes hash to `file_hash`.
    #[error("{cause}")]
    Settings {
        /// The file's hash.
        file_hash: String,
        /// What is wrong with the settings.
        #[source]
        cause: SettingsError,
    },
}

impl Version {
    /// Reads the plugin at `path` (at most `max_bytes`) and its settings.
    pub async fn read(
        path: &Path,
        max_bytes: u64,
        from: SettingsFrom,
    ) -> Result<Version, ReadError> {
        let file = PluginFile::read(path, max_bytes).await?;
        let settings = match from {
            SettingsFrom::Given(settings) => settings,
            SettingsFrom::Beside => match settings::read_beside(path).await {
                Ok(settings) => settings,
                Err(cause) => {
                    let file_hash = file.hash;
                    return Err(ReadError::Settings { file_hash, cause });
                }
            },
        };
        Ok(Version::with(file, settings))
    }

    /// The version of a component already in memory (pulled from a registry).
    pub fn of(bytes: Vec<u8>, settings: Option<Settings>) -> Version {
        let hash = crate::runtime::artifacts::content_hash(&bytes);
        let file = PluginFile {
            bytes,
            hash,
            read: Duration::ZERO,
        };
        Version::with(file, settings)
    }

    fn with(file: PluginFile, settings: Option<Settings>) -> Version {
        let hash = match &settings {
            None => file.hash.clone(),
            Some(s) => format!("{}+{}", file.hash, &s.hash[..s.hash.len().min(12)]),
        };
        Version {
            file,
            settings,
            hash,
        }
    }

    /// Compiles (or takes from the cache) and pre-links this version, then asks it
    /// for its registration, `label` naming it in errors; returns the code (its hash
    /// the version's, its settings set), what it registered, and how long
    /// `register` took.
    pub async fn register(
        self,
        runtime: &Arc<Runtime>,
        label: &str,
    ) -> Result<(Loaded, Registration, Duration), LoadError> {
        let mut loaded = runtime.prepare(self.file).await?;
        loaded.hash = self.hash;
        loaded.code = loaded.code.with_settings(self.settings.map(|s| s.json));
        let registering = Instant::now();
        let registration = (loaded.code.register(label).await).map_err(LoadError::Register)?;
        Ok((loaded, registration, registering.elapsed()))
    }
}

/// Why a plugin's registration could not be had offline.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// A directory could not be listed.
    #[error("{}: cannot list the directory: {cause}", path.display())]
    Directory {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The engine could not be set up.
    #[error("cannot set up the Wasm engine: {0}")]
    Runtime(String),
    /// The file is not a loadable plugin.
    #[error("{}: {cause}", path.display())]
    Load { path: PathBuf, cause: LoadError },
    /// `register` failed.
    #[error("{}: register failed: {cause}", path.display())]
    Register { path: PathBuf, cause: CallError },
    /// The registration breaks the host's rules.
    #[error("{}: {cause}", path.display())]
    Invalid {
        path: PathBuf,
        cause: InvalidRegistration,
    },
    /// The plugin's settings cannot be used.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A `WasmPlugin`'s component could not be pulled.
    #[error("WasmPlugin {plugin}: {cause}")]
    Pull {
        plugin: String,
        cause: crate::registry::RegistryError,
    },
}

/// Loads one plugin file with the settings beside it, if any, and asks it for its
/// registration, checked as the host checks it at load (with the default budgets).
pub async fn load_registered(
    runtime: &Arc<Runtime>,
    path: &Path,
) -> Result<(PluginCode, Registration), RegistrationError> {
    load_registered_from(runtime, path, SettingsFrom::Beside).await
}

/// [`load_registered`] with the given settings instead of those beside the file.
pub async fn load_registered_with(
    runtime: &Arc<Runtime>,
    path: &Path,
    settings: Option<Settings>,
) -> Result<(PluginCode, Registration), RegistrationError> {
    load_registered_from(runtime, path, SettingsFrom::Given(settings)).await
}

async fn load_registered_from(
    runtime: &Arc<Runtime>,
    path: &Path,
    from: SettingsFrom,
) -> Result<(PluginCode, Registration), RegistrationError> {
    let at = || path.to_path_buf();
    let max_bytes = runtime.limits().max_plugin_file_bytes;
    let version = Version::read(path, max_bytes, from)
        .await
        .map_err(|e| match e {
            ReadError::File(cause) => RegistrationError::Load { path: at(), cause },
            ReadError::Settings { cause, .. } => RegistrationError::Settings(cause),
        })?;
    register_checked(runtime, version, path).await
}

/// Registers `version`, `path` naming it, and checks the registration with the
/// default budgets: what every offline source of plugins (files here, `WasmPlugin`s
/// in the daemon) makes of a version.
pub async fn register_checked(
    runtime: &Arc<Runtime>,
    version: Version,
    path: &Path,
) -> Result<(PluginCode, Registration), RegistrationError> {
    let at = || path.to_path_buf();
    let label = path.display().to_string();
    let (loaded, registration, _) =
        version
            .register(runtime, &label)
            .await
            .map_err(|e| match e {
                LoadError::Register(cause) => RegistrationError::Register { path: at(), cause },
                cause => RegistrationError::Load { path: at(), cause },
            })?;
    if let Err(cause) = validate(&registration, &Budget::default()) {
        return Err(RegistrationError::Invalid { path: at(), cause });
    }
    Ok((loaded.code, registration))
}

/// The registration of every plugin in `paths` (files, or directories of plugins),
/// in the order given (a directory's files sorted), each under its identity — its
/// file's name, as the host runs it. Compiled code is kept in and taken from
/// `compile_cache`, as the host does.
pub async fn registrations(
    paths: &[PathBuf],
    compile_cache: Option<&Path>,
) -> Result<Vec<(PathBuf, Registration)>, RegistrationError> {
    let runtime = offline_runtime(compile_cache)?;
    let mut found = Vec::new();
    for path in expand(paths)? {
        let identity = plugin_file::identity(&path).map_err(|e| RegistrationError::Load {
            path: path.clone(),
            cause: LoadError::Read(e),
        })?;
        let (_, registration) = load_registered(&runtime, &path).await?;
        found.push((path, registration.under(&identity)));
    }
    Ok(found)
}

/// A runtime with the default limits, for registrations made offline.
pub fn offline_runtime(compile_cache: Option<&Path>) -> Result<Arc<Runtime>, RegistrationError> {
    let runtime = Runtime::new(Limits::default(), compile_cache)
        .map_err(|e| RegistrationError::Runtime(chain(&e)))?;
    Ok(Arc::new(runtime))
}

/// Files as given; directories replaced by their plugin files, sorted.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, RegistrationError> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let found = plugin_files(path).map_err(|cause| RegistrationError::Directory {
            path: path.clone(),
            cause,
        })?;
        files.extend(found);
    }
    Ok(files)
}
