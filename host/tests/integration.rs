//! The host's integration tests, as one binary (one link, not one per file): each
//! file a module, its tests run beside its own only (`support::turns`). Most run
//! against the real control plane of `make test`; `boundary_fuzz` is a binary of its
//! own, since it counts every allocation of its process.

mod support;

mod alerts;
mod capabilities;
mod capability_backends;
mod capability_properties;
mod chart;
mod churn;
mod contract_policy;
mod contract_versions;
mod dashboard;
mod deploy;
mod deploy_every_replica;
mod deployment_reconcile;
mod guides;
mod host_faults;
mod hostile_arguments;
mod hostile_crash_loop;
mod hostile_leader;
mod hostile_leases;
mod hostile_objects;
mod hostile_plugins;
mod hostile_registrations;
mod hostile_registries;
mod hot_reload;
mod identity;
mod image;
mod impersonation;
mod instance_bounds;
mod instance_reuse;
mod leader_election;
mod leader_failover;
mod loader_fuzz;
mod newcomer;
mod node_registry;
mod other_languages;
mod owner_mapping;
mod plugin_caches;
mod plugin_chaos;
mod plugin_copies;
mod plugin_leases;
mod plugin_settings;
mod plugin_state_events;
mod pod_counter;
mod pod_counter_ending_namespace;
mod probes;
mod rbac;
mod read_rights;
mod record_replay;
mod registry;
mod restarts;
mod shared_informers;
mod testkit;
mod testkit_faults;
mod testkit_steps;
mod testkit_time;
mod traces;
mod wasm_plugin_credentials;
mod wasm_plugin_leases;
mod wasm_plugin_sizes;
mod wasm_plugins;
mod watch_options;
mod webapp_registry;
