//! `rbac`: the rights of plugins — files, directories of them, or `WasmPlugin`s pulled
//! from their registries — and of the host, as YAML for `kubectl apply -f -` or as
//! values of the Helm chart.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use kube::ResourceExt;
use wcm_core::config::default_compile_cache;
use wcm_core::contract::Registration;
use wcm_core::loading::registrations;
use wcm_core::registry::{Registry, RegistryAuth};
use wcm_core::rights::identity::{ServiceAccounts, valid_account};
use wcm_core::rights::{Naming, chart_values, document, plugin_rights, render};
use wcm_daemon::wasmplugin::resource_registrations;
use wcm_daemon::wasmplugin::{WasmPlugin, parse};

use crate::cli::{RbacArgs, RbacOutput};
use crate::registry_cli::RegistryAccess;

/// How long each `WasmPlugin`'s pull may take.
const PULL_TIMEOUT: Duration = Duration::from_secs(300);

/// Prints the rights of every plugin in `args.paths` and of the host.
pub async fn print_rbac(args: RbacArgs) -> anyhow::Result<()> {
    valid_account(&args.host_service_account)
        .map_err(anyhow::Error::msg)
        .context("--host-service-account")?;
    let accounts = ServiceAccounts::new(&args.namespace, &args.service_account_prefix)
        .map_err(anyhow::Error::msg)
        .context("--namespace / --service-account-prefix")?;
    let naming = Naming {
        accounts,
        host: args.host_service_account.clone(),
        pod_security: args.pod_security,
    };
    let mut plugins = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for (path, registration) in all_registrations(&args).await? {
        (naming.accounts.valid_name(&registration.name)).map_err(anyhow::Error::msg)?;
        if let Some(first) = seen.insert(registration.name.clone(), path.clone()) {
            anyhow::bail!(
                "{} and {} are both plugin {:?} (a plugin is named by its file or resource)",
                first.display(),
                path.display(),
                registration.name
            );
        }
        plugins.push(plugin_rights(&registration));
    }
    match args.output {
        RbacOutput::Kubectl => print!("{}", render(&plugins, &naming)),
        RbacOutput::ChartValues => print!("{}", chart_values(&document(&plugins, &naming))),
    }
    Ok(())
}

/// The registrations of the plugin files and directories, then of the `WasmPlugin`s.
async fn all_registrations(args: &RbacArgs) -> anyhow::Result<Vec<(PathBuf, Registration)>> {
    let (documents, files): (Vec<&PathBuf>, Vec<&PathBuf>) =
        args.paths.iter().partition(|p| is_document(p));
    let cache = default_compile_cache();
    let files: Vec<PathBuf> = files.into_iter().cloned().collect();
    let mut found = match files.is_empty() {
        true => Vec::new(),
        false => registrations(&files, Some(&cache)).await?,
    };
    if args.access.password_stdin && documents.iter().any(|p| p.as_path() == Path::new("-")) {
        anyhow::bail!("--password-stdin reads standard input: give the WasmPlugins as a file");
    }
    let mut resources = Vec::new();
    for path in documents {
        let (text, what) = read_document(path)?;
        resources.extend(parse(&text, &what)?);
    }
    if !resources.is_empty() {
        let (registry, auth) = registry_access(&args.access, &resources)?;
        // Every registry the resources name has its entry.
        let auth_for = |host: &str| Ok(auth.get(host).cloned().unwrap_or(RegistryAuth::Anonymous));
        found.extend(resource_registrations(&resources, &registry, auth_for, Some(&cache)).await?);
    }
    Ok(found)
}

/// A client for the registries `resources` name, and each registry's credentials:
/// `--username`'s for the one registry they name (refused for several, so a password
/// goes to no registry it was not meant for, and so is `--plain-http`), else the Docker
/// config file's.
fn registry_access(
    access: &RegistryAccess,
    resources: &[WasmPlugin],
) -> anyhow::Result<(Registry, BTreeMap<String, RegistryAuth>)> {
    let mut hosts = BTreeSet::new();
    for plugin in resources {
        let reference = wcm_core::registry::reference(&plugin.spec.image)
            .with_context(|| format!("WasmPlugin {}", plugin.name_any()))?;
        hosts.insert(reference.resolve_registry().to_string());
    }
    let for_one = [
        ("--username", access.username.is_some()),
        ("--plain-http", access.plain_http),
    ];
    if let Some((flag, _)) = for_one.iter().find(|(_, given)| *given && hosts.len() > 1) {
        anyhow::bail!(
            "{flag} is for one registry; these WasmPlugins name {}: give them in \
             separate calls (credentials of several registries: the Docker config file)",
            hosts.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let first = hosts.first().map(String::as_str).unwrap_or_default();
    let registry = access.registry_of(first, PULL_TIMEOUT)?;
    let mut auth = BTreeMap::new();
    for host in hosts {
        let credentials = access.auth(&host)?;
        auth.insert(host, credentials);
    }
    Ok((registry, auth))
}

/// `-`, or a `.yaml`, `.yml` or `.json` file: `WasmPlugin`s, not a plugin.
fn is_document(path: &Path) -> bool {
    let extension = path.extension().and_then(|e| e.to_str());
    path == Path::new("-") || matches!(extension, Some("yaml" | "yml" | "json"))
}

/// The text of `path` (standard input for `-`) and its name for errors.
fn read_document(path: &Path) -> anyhow::Result<(String, String)> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        return Ok((text, "standard input".into()));
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((text, path.display().to_string()))
}
