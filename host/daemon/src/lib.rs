//! The wasm-controller-manager daemon: plugins of the runtime core run as controllers.
//!
//! The [`manager`] loads plugins from a directory ([`watcher`]), a plugin image
//! ([`plugin_images`]) or `WasmPlugin` resources ([`wasmplugin`]) and runs each as a
//! [`controller`]: shared informers map every change to a reconcile key, keys are
//! queued per plugin and reconciled in fresh, resource-limited Wasm instances. [`leader`]
//! elects one replica per plugin (or one for all) on Leases; [`status`] is the plugin
//! table the HTTP [`server`] serves beside metrics and [`probes`]; [`daemon`] puts it
//! together for the binary's `run`.

pub mod controller;
pub mod daemon;
pub mod leader;
pub mod manager;
pub mod plugin_images;
pub mod probes;
pub mod server;
pub mod status;
pub mod wasmplugin;
pub mod watcher;
