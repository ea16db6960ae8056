//! wasm-controller-manager: runs Kubernetes controllers that are WebAssembly components.
//!
//! The daemon watches the kinds each plugin registers through shared informers, maps
//! every change to a reconcile key, queues the keys per plugin, and calls the plugin's
//! `reconcile` export in a fresh, resource-limited Wasm instance. Plugins reach the
//! cluster only through the capabilities in [`capabilities`], each checked against the
//! permissions the plugin declared.

pub(crate) mod bindings;
pub mod budget;
pub mod capabilities;
pub mod componentize;
pub mod config;
pub mod contract;
pub(crate) mod controller;
pub mod daemon;
pub(crate) mod disk_bound;
pub(crate) mod host_state;
pub(crate) mod keys;
pub(crate) mod kube;
pub mod leader;
pub mod loading;
pub(crate) mod logs;
pub(crate) mod manager;
pub mod metrics;
pub(crate) mod plugin;
pub mod plugin_images;
pub(crate) mod probes;
pub mod queue;
pub(crate) mod rate;
pub mod registry;
pub mod rights;
pub mod runtime;
pub mod scaffold;
pub(crate) mod server;
pub(crate) mod sha256;
pub mod status;
pub mod tape;
pub mod testing;
pub mod testkit;
pub mod traces;
pub mod wasmplugin;
pub(crate) mod watcher;

#[cfg(test)]
mod module_graph;
