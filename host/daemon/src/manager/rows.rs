//! What the plugin table shows of each plugin file, with the log line and the gauges
//! that go with a change of it: the one place a plugin's state becomes its row.
//!
//! The manager decides what a plugin is (running, upgraded, waiting, failed,
//! degraded); this module says so to the operator, in the table `plugins` prints, the
//! `wcm_plugin_*` gauges and the log.

use std::time::Duration;

use super::PluginError;
use super::slot::Running;
use super::wait_for::WaitFor;
use crate::controller::{ControllerContext, Health, PluginController};
use crate::status::{LeaseHolder, Limits, PluginStatus, PluginTable, Rights, State};
use wcm_core::contract::Registration;
use wcm_core::metrics::PluginLabels;
use wcm_core::runtime::Loaded;

/// The plugin table and the per-plugin gauges beside it, as the manager writes them.
pub(super) struct Rows {
    table: PluginTable,
    ctx: ControllerContext,
    /// Shown in each running row's limits.
    reconcile_timeout: Duration,
    max_memory_bytes: usize,
}

impl Rows {
    /// Writes into `table`, with `ctx`'s metrics, leader and reviewer.
    pub(super) fn new(
        table: PluginTable,
        ctx: ControllerContext,
        limits: &wcm_core::config::Limits,
    ) -> Rows {
        Rows {
            table,
            ctx,
            reconcile_timeout: limits.reconcile_timeout,
            max_memory_bytes: limits.max_memory_bytes,
        }
    }

    /// The row of `file`, as last written.
    pub(super) fn row(&self, file: &str) -> Option<PluginStatus> {
        self.table.row(file)
    }

    /// `file` is gone: so is its row.
    pub(super) fn remove(&self, file: &str) {
        self.table.remove(file);
    }

    /// `file` is refused for `why` (nothing of it runs).
    pub(super) fn failed(&self, file: &str, why: &str) {
        self.table.set(PluginStatus::failed(file, why));
    }

    /// The running row of `file`, with its limits and rights.
    pub(super) fn running(&self, file: &str, running: &Running, loaded: &Loaded) {
        let controller = &running.controller;
        let reg = controller.registration();
        let limits = Limits {
            reconcile_timeout_ms: self.reconcile_timeout.as_millis() as u64,
            max_memory_bytes: self.max_memory_bytes,
            concurrent_reconciles: controller.concurrency(),
            budget: controller.budget().clone(),
        };
        let row = PluginStatus::running(file, &reg.name, &reg.version, &loaded.hash)
            .with_registered_as(reg.registered_as.as_deref());
        let contract = loaded.code.contract().to_string();
        self.table
            .set(row.with_limits(limits).with_contract(contract));
        self.rights(file, controller);
    }

    /// A load of `file` failed: a running version keeps running and its row notes the
    /// refused upgrade; otherwise the file is marked failed.
    pub(super) fn load_failed(
        &self,
        file: &str,
        running: Option<&Running>,
        hash: &str,
        error: &PluginError,
    ) {
        if let Some(running) = running {
            let reg = running.controller.registration();
            tracing::error!(file, hash, %error, running = %format!("{} {}", reg.name, reg.version),
                running_hash = %super::short(&running.hash),
                "plugin upgrade failed; the running version keeps running");
            self.table
                .set_reason(file, Some(format!("upgrade refused: {error}")));
        } else {
            tracing::error!(file, hash, %error, "plugin failed to load");
            self.failed(file, &error.to_string());
        }
    }

    /// `file`'s registered plugin waits for `why`; `again` if it waited already (the
    /// log then says so only when the reason changed), `upgrade` if a version of it
    /// runs (whose row then stays, noting the wait).
    pub(super) fn waiting(
        &self,
        file: &str,
        registration: &Registration,
        why: &WaitFor,
        again: bool,
        upgrade: bool,
    ) {
        let (state, reason) = why.row();
        let plugin = &registration.name;
        if again && self.table.reason_of(file).as_deref() == Some(reason.as_str()) {
            tracing::debug!(file, plugin, reason, "still waiting");
        } else {
            tracing::warn!(file, plugin, version = %registration.version, reason,
                "{}; it starts by itself once this is resolved", why.summary());
        }
        if upgrade {
            let upgrade = format!("upgrade to {} waits: {reason}", registration.version);
            return self.table.set_reason(file, Some(upgrade));
        }
        let row = PluginStatus::waiting(file, (plugin, &registration.version), state, &reason)
            .with_registered_as(registration.registered_as.as_deref());
        self.table.set(row);
        if let WaitFor::Rights(e) = why {
            let rights = Rights::of(e.user.clone(), &e.review);
            self.table.set_rights(file, Some(rights));
            self.missing_rights(plugin, e.review.denied.len());
        }
    }

    /// `file`'s health went from `was` to `now`: its row, and a log line when its
    /// state changed (newer details of the same state only update the row).
    pub(super) fn health(&self, file: &str, plugin: &str, was: &Health, now: &Health) {
        if now.name() != was.name() {
            let was = was.name();
            match now {
                Health::Running => {
                    tracing::info!(
                        file,
                        plugin,
                        was,
                        "plugin recovered; failed keys retried now"
                    )
                }
                Health::Degraded(why) => {
                    tracing::warn!(file, plugin, why, "plugin degraded: a watch it needs fails")
                }
                Health::CrashLooping(why) => {
                    tracing::warn!(file, plugin, why, "plugin crash-looping")
                }
                Health::Forbidden(why) => tracing::warn!(
                    file,
                    plugin,
                    why,
                    "plugin forbidden: RBAC no longer lets it read a kind it watches"
                ),
            }
        }
        let (state, reason) = match now {
            Health::Running => (State::Running, None),
            Health::Degraded(why) => (State::Degraded, Some(why.clone())),
            Health::CrashLooping(why) => (State::CrashLooping, Some(why.clone())),
            Health::Forbidden(why) => (State::Forbidden, Some(why.clone())),
        };
        self.table.set_health(file, state, reason);
    }

    /// The replica holding `plugin`'s Lease, into `file`'s row.
    pub(super) fn lease(&self, file: &str, plugin: &str) {
        let holder = self.ctx.leader.holder(plugin).map(|h| LeaseHolder {
            holder: h.identity,
            transitions: h.transitions,
        });
        self.table.set_lease(file, holder);
    }

    /// `controller`'s declared and granted rules, into `file`'s row and the
    /// missing-rights gauge (nothing when plugins share the host's identity).
    pub(super) fn rights(&self, file: &str, controller: &PluginController) {
        let plugin = &controller.registration().name;
        let rights = self.ctx.reviewer.as_ref().zip(controller.review());
        let rights = rights.map(|(reviewer, review)| Rights::of(reviewer.user(plugin), &review));
        if let Some(rights) = &rights {
            self.missing_rights(plugin, rights.denied.len());
        }
        self.table.set_rights(file, rights);
    }

    /// The bytes of the host's caches `controller`'s watches hold, into its gauge;
    /// `Some` when that is more than its limit.
    pub(super) fn cache_over_limit(&self, controller: &PluginController) -> Option<usize> {
        let cached = controller.cache_bytes();
        let labels = PluginLabels {
            plugin: controller.registration().name.clone(),
        };
        let gauge = self.ctx.metrics.plugin_cache_bytes.get_or_create(&labels);
        gauge.set(cached as i64);
        (cached > controller.budget().watches.max_cache_bytes).then_some(cached)
    }

    fn missing_rights(&self, plugin: &str, missing: usize) {
        let labels = PluginLabels {
            plugin: plugin.to_string(),
        };
        let gauge = self.ctx.metrics.missing_rights.get_or_create(&labels);
        gauge.set(missing as i64);
    }
}
