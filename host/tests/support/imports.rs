//! The contract's `cluster` and `metrics` imports (0.3) as a test calls them directly
//! on a plugin's host state: the result the plugin would receive. The generated
//! imports return it inside `wasmtime::Result`, whose error is a host fault trapping
//! the plugin's call; here a host fault fails the test, naming it (the host's own
//! faults are tested in `host_faults.rs` through the generated imports).

use std::future::Future;

use wcm_core::bindings::v0_3::wcm::controller::cluster::{
    self as wit, DeleteOptions, Event, PatchType,
};
use wcm_core::bindings::v0_3::wcm::controller::metrics as wit_metrics;
use wcm_core::bindings::v0_3::wcm::controller::types::{Error, Gvk, ObjectRef};
use wcm_core::runtime::HostState;

/// The plugin's result of an import, a host fault failing the test.
fn answered<T>(answer: wasmtime::Result<Result<T, Error>>) -> Result<T, Error> {
    answer.unwrap_or_else(|fault| panic!("the import trapped with a host fault: {fault:?}"))
}

/// Declares each import as a method returning the plugin's result (in the trait) or
/// forwards it to the generated import (in the impl).
macro_rules! imports {
    (trait $name:ident; $($f:ident($($arg:ident: $ty:ty),*) -> $out:ty;)+) => {
        /// The imports of one interface, as the plugin receives their results.
        pub trait $name {
            $(
                #[doc = concat!("`", stringify!($f), "`.")]
                fn $f(&mut self, $($arg: $ty),*) -> impl Future<Output = Result<$out, Error>> + Send;
            )+
        }
    };
    (impl $name:ident for $wit:path; $($f:ident($($arg:ident: $ty:ty),*) -> $out:ty;)+) => {
        impl $name for HostState {
            $(
                fn $f(&mut self, $($arg: $ty),*) -> impl Future<Output = Result<$out, Error>> + Send {
                    async move { answered(<HostState as $wit>::$f(self, $($arg),*).await) }
                }
            )+
        }
    };
}

macro_rules! cluster_imports {
    ($($how:tt)+) => {
        imports! {
            $($how)+;
            get(obj: ObjectRef) -> String;
            list(kind: Gvk, namespace: Option<String>, selector: Option<String>) -> Vec<String>;
            list_first(
                kind: Gvk, namespace: Option<String>, selector: Option<String>, limit: u32
            ) -> Vec<String>;
            count(kind: Gvk, namespace: Option<String>, selector: Option<String>) -> u64;
            patch_labels(obj: ObjectRef, set: Vec<(String, String)>, remove: Vec<String>) -> ();
            patch_finalizers(obj: ObjectRef, add: Vec<String>, remove: Vec<String>) -> ();
            patch_status(obj: ObjectRef, status: String) -> ();
            apply(object: String, force: bool) -> String;
            create(object: String) -> String;
            patch(
                obj: ObjectRef, kind: PatchType, patch: String, subresource: Option<String>
            ) -> String;
            update(object: String) -> String;
            delete(obj: ObjectRef, options: DeleteOptions) -> ();
            record_event(event: Event) -> ();
        }
    };
}

macro_rules! metrics_imports {
    ($($how:tt)+) => {
        imports! {
            $($how)+;
            add(name: String, labels: Vec<String>, value: f64) -> ();
            set(name: String, labels: Vec<String>, value: f64) -> ();
            observe(name: String, labels: Vec<String>, value: f64) -> ();
        }
    };
}

cluster_imports!(trait Cluster);
cluster_imports!(impl Cluster for wit::Host);
metrics_imports!(trait Metrics);
metrics_imports!(impl Metrics for wit_metrics::Host);
