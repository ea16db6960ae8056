//! The runtime core of wasm-controller-manager: what a plugin runs on, below any daemon.
//!
//! A plugin is a WebAssembly component speaking the contract in [`contract`] (its
//! generated bindings in [`bindings`]). [`runtime`] compiles, caches and instantiates
//! it with the limits of [`budget`]; every call it makes into the host goes through
//! the capability pipeline of [`capabilities`], checked against the permissions it
//! declared and the rights it was granted ([`rights`]), answered from the informer
//! caches or the API server of [`kube`] (or the test kit's in-memory cluster, behind
//! the same [`capabilities::Backend`]). [`queue`] holds reconcile keys, [`tape`]
//! records and replays what a plugin saw, [`registry`] pulls plugins from OCI
//! registries, [`metrics`] and [`traces`] say what it all cost.
//!
//! The daemon (`wcm-daemon`) and the tooling (`wcm-tooling`) are built on this crate
//! and on nothing of each other.

pub mod bindings;
pub mod budget;
pub mod capabilities;
pub mod config;
pub mod contract;
mod disk_bound;
mod host_state;
pub mod keys;
pub mod kube;
pub mod leader_gate;
pub mod limits;
pub mod loading;
pub mod logs;
pub mod metrics;
pub mod plugin;
pub mod queue;
mod rate;
pub mod registry;
pub mod requeue;
pub mod rights;
pub mod runtime;
pub mod sha256;
pub mod tape;
pub mod traces;
