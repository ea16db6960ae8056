//! The Rust SDK for writing wasm-controller-manager controllers.
//!
//! A controller is a type implementing [`Controller`], exported with
//! [`export_controller!`] from a `cdylib` crate built for `wasm32-wasip2`. The host
//! calls [`Controller::registration`] once, then [`Controller::reconcile`] with one
//! key at a time, each time in a fresh instance: keep no state between calls, read
//! the current state through [`cluster`].
//!
//! # Example
//!
//! A controller that labels every Pod with its node's name:
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use wasm_controller_sdk::{
//!     cluster, export_controller, Action, Controller, Failure, ObjectRef, Registration,
//!     Request, Verb, Watch,
//! };
//!
//! struct NodeLabeller;
//!
//! impl Controller for NodeLabeller {
//!     fn registration() -> Registration {
//!         Registration::new("node-labeller", env!("CARGO_PKG_VERSION"))
//!             .watch(Watch::all::<Pod>())
//!             .permit::<Pod>(&[Verb::Patch])
//!     }
//!
//!     fn reconcile(req: Request) -> Result<Action, Failure> {
//!         let pod: Pod = match cluster::get(req.namespace.as_deref(), &req.name) {
//!             Ok(pod) => pod,
//!             Err(e) if e.is_not_found() => return Ok(Action::Done), // deleted meanwhile
//!             Err(e) => return Err(e.into()),
//!         };
//!         let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
//!         let target = ObjectRef::new::<Pod>(req.namespace.as_deref(), &req.name);
//!         cluster::patch_labels(&target, &[("example.com/node", &node)], &[])?;
//!         Ok(Action::Done)
//!     }
//! }
//!
//! export_controller!(NodeLabeller);
//! ```

#![warn(missing_docs)]

// Lets the generated bindings name this crate by its public path, which is also the
// path the `export_controller!` expansion uses inside plugin crates.
extern crate self as wasm_controller_sdk;

pub mod cluster;
pub mod config;
mod error;
pub mod finalizer;
pub mod log;
pub mod metrics;
pub mod owner;
mod partial;
mod types;

/// The raw bindings of the WIT contract; use the items re-exported at the crate root.
#[doc(hidden)]
#[allow(missing_docs, clippy::all)]
pub mod wit {
    wit_bindgen::generate!({
        path: "../wit",
        world: "controller",
        pub_export_macro: true,
        default_bindings_module: "wasm_controller_sdk::wit",
        runtime_path: "wasm_controller_sdk::wit::__rt",
        generate_all,
        additional_derives: [PartialEq, Eq, Hash],
        // A metric's buckets are floats, which have no `Eq` or `Hash`.
        additional_derives_ignore: ["metric", "registration"],
    });

    #[doc(hidden)]
    pub use wit_bindgen::rt as __rt;
}

pub use partial::PartialObjectMeta;
pub use types::{Predicate, Verb};
pub use wit::exports::wcm::controller::reconciler::{
    Action, Failure, KeyMapping, Metric, MetricKind, Permission, Registration, Request, Watch,
};
pub use wit::wcm::controller::types::{Cause, Error, ErrorCode, EventType, Gvk, ObjectRef};

/// A controller: what it watches and how it reconciles one key.
pub trait Controller {
    /// The plugin's name, version, watches and permissions; called once at load.
    fn registration() -> Registration;

    /// Brings the cluster in line with the desired state for `request`. Runs in a
    /// fresh instance each time and may run again for the same key at any time, so it
    /// must be idempotent. A [`Failure::Retry`] (what `?` makes of a host call's
    /// [`Error`]) is logged by the host and retried with backoff; a
    /// [`Failure::Terminal`] ([`Error::terminal`]) is recorded and not retried until
    /// the key is queued again.
    fn reconcile(request: Request) -> Result<Action, Failure>;
}

/// Exports a [`Controller`] implementation as the plugin's `reconciler`.
///
/// Use it once, at the crate root of a `cdylib`, with the type's name.
#[macro_export]
macro_rules! export_controller {
    ($controller:ident) => {
        impl $crate::wit::exports::wcm::controller::reconciler::Guest for $controller {
            fn register() -> $crate::Registration {
                <$controller as $crate::Controller>::registration()
            }

            fn reconcile(req: $crate::Request) -> ::core::result::Result<$crate::Action, $crate::Failure> {
                <$controller as $crate::Controller>::reconcile(req)
            }
        }

        $crate::wit::export!($controller with_types_in $crate::wit);
    };
}
