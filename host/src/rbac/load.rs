//! Reads plugin files (or every plugin of a directory) and asks each for its
//! registration in the sandbox, loaded and checked as the host loads and checks it
//! ([`crate::loading`]); no cluster.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Limits;
use crate::contract::Registration;
use crate::loading::{RegistrationError, load_registered};
use crate::plugin::file as plugin_file;
use crate::runtime::{LoadError, Runtime, chain};
use crate::watcher::plugin_files;

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
