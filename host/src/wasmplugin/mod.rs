//! Plugins declared as `WasmPlugin` resources and pulled from OCI registries.

mod pull_secret;
mod resource;

pub use pull_secret::{DOCKER_CONFIG_JSON, PullSecretError, pull_auth};
pub use resource::{RuleCounts, WasmPlugin, WasmPluginSpec, WasmPluginStatus, crd_yaml};
