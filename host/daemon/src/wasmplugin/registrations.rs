//! `WasmPlugin`s registered offline, as `rbac` reads them from a file: each component
//! pulled, its settings taken from the spec, its registration checked as a plugin
//! file's is.

use std::path::{Path, PathBuf};

use kube::ResourceExt;
use wcm_core::contract::Registration;
use wcm_core::loading::{RegistrationError, Version, offline_runtime, register_checked};
use wcm_core::registry::{self, Registry, RegistryAuth, RegistryError};
use wcm_core::runtime::settings::{self, SettingsError};

use super::{WasmPlugin, WasmPluginSpec};

/// The version of `WasmPlugin` `name`'s pulled component, `spec.settings` its
/// settings.
pub fn version_of(
    name: &str,
    spec: &WasmPluginSpec,
    bytes: Vec<u8>,
) -> Result<Version, SettingsError> {
    let label = format!("WasmPlugin {name}");
    let settings = (spec.settings.as_ref())
        .map(|s| settings::of_object(s, &label))
        .transpose()?;
    Ok(Version::of(bytes, settings))
}

/// The registration of every `WasmPlugin` in `plugins`, in order, each under its
/// name: its component pulled from its registry with `registry` (credentials from
/// `auth_for`, by registry host; a pull Secret is the cluster's, not read offline),
/// its settings from its spec.
pub async fn resource_registrations(
    plugins: &[WasmPlugin],
    registry: &Registry,
    auth_for: impl Fn(&str) -> Result<RegistryAuth, RegistryError>,
    compile_cache: Option<&Path>,
) -> Result<Vec<(PathBuf, Registration)>, RegistrationError> {
    let runtime = offline_runtime(compile_cache)?;
    let mut found = Vec::new();
    for plugin in plugins {
        let name = plugin.name_any();
        let pull = |cause| RegistrationError::Pull {
            plugin: name.clone(),
            cause,
        };
        let reference = registry::reference(&plugin.spec.image).map_err(pull)?;
        let auth = auth_for(reference.resolve_registry()).map_err(pull)?;
        let max_bytes = runtime.limits().max_plugin_file_bytes;
        let pulled = registry
            .pull(&reference, &auth, max_bytes)
            .await
            .map_err(pull)?;
        let version = version_of(&name, &plugin.spec, pulled.bytes)?;
        let path = PathBuf::from(format!("WasmPlugin/{name}"));
        let (_, registration) = register_checked(&runtime, version, &path).await?;
        found.push((path, registration.under(&name)));
    }
    Ok(found)
}
