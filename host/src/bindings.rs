//! The host side of the WIT contract in `wit/`: the one `bindgen!` of the host.
//!
//! Cluster calls are `async` (they may wait on the API server); the plugin's exports
//! are called asynchronously so epoch deadlines and cancellation work. Host functions
//! never trap on a bad request: they return the WIT `error` the plugin can handle.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "controller",
    imports: {
        "wcm:controller/cluster": async,
        default: async,
    },
    exports: { default: async },
    additional_derives: [Hash],
});

pub use exports::wcm::controller::reconciler::{
    Action, KeyMapping, Permission, Registration, Request, Verb, Watch,
};
pub use wcm::controller::log::Level;
pub use wcm::controller::types::{Error as WitError, EventType, Gvk, ObjectRef};

/// The WIT package version this host implements; plugins must share its major.minor.
pub const WIT_PACKAGE: &str = "wcm:controller@0.2.0";
