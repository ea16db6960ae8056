//! Everything the host does with the Kubernetes API: discovery, informers and their
//! cache, label rules and selectors, writes and Events.

pub mod cache;
pub mod decoded;
pub mod discovery;
pub mod event_filter;
pub mod event_series;
pub mod events;
pub mod field_selector;
pub mod finalizers;
pub mod informer;
pub mod labels;
pub mod names;
pub mod object_writes;
pub mod predicates;
pub mod selector;
pub mod writes;
