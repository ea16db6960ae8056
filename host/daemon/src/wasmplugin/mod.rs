//! Plugins declared as `WasmPlugin` resources and pulled from OCI registries: the
//! resource, its pull Secret, fetching its component, its status as a projection of
//! what the host knows, and the watch of the host's namespace.

mod documents;
mod fetch;
mod pull_secret;
mod registrations;
mod resource;
mod status;
mod watch;

pub use documents::{DocumentError, parse};
pub use fetch::{FetchError, FetchedPlugin, Fetcher, reference_for};
pub use pull_secret::{DOCKER_CONFIG_JSON, PullSecretError, pull_auth};
pub use registrations::{resource_registrations, version_of};
pub use resource::{
    MAX_RULES, MAX_SETTINGS_KEYS, RuleCounts, VerifySpec, WasmPlugin, WasmPluginSpec,
    WasmPluginStatus, crd_yaml,
};
pub use status::{Facts, Pull, Pulls, status_of, status_patch};
pub use watch::{ResourceChange, changes, secret_changes};
