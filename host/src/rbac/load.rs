//! Reads plugin files (or every plugin of a directory) and asks each for its
//! registration in the sandbox, checked as the host checks it at load; no cluster.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::budget::Budget;
use crate::config::Limits;
use crate::contract::Registration;
use crate::plugin::file as plugin_file;
use crate::plugin::{InvalidRegistration, validate};
use crate::runtime::settings::{self, Settings, SettingsError};
use crate::runtime::{CallError, LoadError, PluginCode, Runtime, chain};
use crate::watcher::plugin_files;

/// Why a plugin's registration could not be had.
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
}

/// The registration of every plugin in `paths` (files, or directories of plugins),
/// in the order given (a directory's files sorted), each under its identity — its
/// file's name, as the host runs it. Compiled code is kept in and taken from
/// `compile_cache`, as the host does.
pub async fn registrations(
    paths: &[PathBuf],
    compile_cache: Option<&Path>,
) -> Result<Vec<(PathBuf, Registration)>, RegistrationError> {
    let runtime = Runtime::new(Limits::default(), compile_cache)
        .map_err(|e| RegistrationError::Runtime(chain(&e)))?;
    let runtime = Arc::new(runtime);
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

/// Loads one plugin file with the settings beside it, if any, and asks it for its
/// registration, checked as the host checks it at load.
pub async fn load_registered(
    runtime: &Arc<Runtime>,
    path: &Path,
) -> Result<(PluginCode, Registration), RegistrationError> {
    let settings = settings::read_beside(path).await?;
    load_registered_with(runtime, path, settings).await
}

/// [`load_registered`] with the given settings instead of those beside the file.
pub async fn load_registered_with(
    runtime: &Arc<Runtime>,
    path: &Path,
    settings: Option<Settings>,
) -> Result<(PluginCode, Registration), RegistrationError> {
    let loaded = runtime.load(path).await;
    let loaded = loaded.map_err(|cause| RegistrationError::Load {
        path: path.to_path_buf(),
        cause,
    })?;
    let code = loaded.code.with_settings(settings.map(|s| s.json));
    let label = path.display().to_string();
    let registration = code.register(&label).await;
    let registration = registration.map_err(|cause| RegistrationError::Register {
        path: path.to_path_buf(),
        cause,
    })?;
    if let Err(cause) = validate(&registration, &Budget::default()) {
        let path = path.to_path_buf();
        return Err(RegistrationError::Invalid { path, cause });
    }
    Ok((code, registration))
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
