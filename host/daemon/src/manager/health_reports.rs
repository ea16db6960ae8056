//! Brings each running plugin's health into the table, the state metric and the log
//! when it changes: `degraded` while a watch it needs fails, `crash-looping` while
//! its reconciles keep trapping, `forbidden` while RBAC does not let it read a kind
//! it watches, `running` again when that ends; and its declared against granted
//! rules.

use super::Manager;
use crate::controller::{ControllerContext, Health, PluginController};
use crate::status::PluginTable;
use crate::status::{LeaseHolder, PluginStatus, Rights, State};
use wcm_core::metrics::PluginLabels;

impl Manager {
    /// Looks at every running plugin and records the ones whose health changed. A
    /// change of state is logged; newer details of the same state (another crash,
    /// another API error) only update the table.
    pub(super) fn refresh_health(&mut self) {
        let mut over_cache = Vec::new();
        for (file, running) in self.files.all_running_mut() {
            running.controller.refresh_metrics();
            running.controller.replay_reopened();
            if let Some(cached) = over_its_cache(&self.ctx, &running.controller) {
                over_cache.push((file.clone(), cached));
                continue;
            }
            show_rights(&self.ctx, &self.table, file, &running.controller);
            let plugin = &running.controller.registration().name;
            let holder = self.ctx.leader.holder(plugin).map(|h| LeaseHolder {
                holder: h.identity,
                transitions: h.transitions,
            });
            self.table.set_lease(file, holder);
            let health = running.controller.health();
            if health == running.health {
                continue;
            }
            let plugin = running.controller.registration().name.clone();
            let (state, reason) = row_of(&health);
            if health.name() != running.health.name() {
                let was = running.health.name();
                match &health {
                    Health::Running => {
                        running.controller.recovered();
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
            self.table.set_health(file, state, reason);
            running.health = health;
        }
        for (file, cached) in over_cache {
            self.stop_over_cache(&file, cached);
        }
        self.probes.set_ready(self.readiness());
    }

    /// Stops `file`'s plugin, whose watches hold `cached` bytes of the host's caches,
    /// more than its limit: the informers only it used are released with it, and it
    /// stays stopped (`failed`, saying why) until its file or settings change.
    fn stop_over_cache(&mut self, file: &str, cached: usize) {
        let Some(running) = self.files.stop(file) else {
            return;
        };
        let plugin = running.controller.registration().name.clone();
        let limit = running.controller.budget().watches.max_cache_bytes;
        let why = format!(
            "its watches hold {} MiB of the host's caches (informers shared with other \
             plugins counted in part), more than its limit of {} MiB \
             (--max-cache-mib-per-plugin); stopped until its file or settings change",
            cached >> 20,
            limit >> 20
        );
        tracing::error!(
            file,
            plugin,
            why,
            "plugin stopped: it makes the host cache too much"
        );
        self.table.set(PluginStatus::failed(file, &why));
        self.stop_in_background(running.controller, move || {
            tracing::info!(plugin, "plugin over its cache limit stopped");
        });
    }

    /// Ready once the first scan's files are loaded (or failed), every informer a
    /// running plugin needs has listed, unless it fails (that plugin is `degraded`),
    /// and, with a Lease per plugin, the group knows what this replica runs.
    fn readiness(&self) -> Result<(), String> {
        if let Some(left) = self.first_scan.filter(|n| *n > 0) {
            return Err(format!("loading {left} plugin file(s) found at start"));
        }
        let waiting: Vec<&str> = (self.files.all_running())
            .filter(|(_, r)| r.controller.syncing())
            .map(|(_, r)| r.controller.registration().name.as_str())
            .collect();
        if !waiting.is_empty() {
            return Err(format!("informers of {} still listing", waiting.join(", ")));
        }
        // With a Lease per plugin, a replica is ready to take work once the others
        // know which plugins it runs (a rolling update then moves each plugin once).
        let unannounced = self.ctx.leader.unannounced();
        match unannounced.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "the other replicas do not know yet that this one runs {}",
                unannounced.join(", ")
            )),
        }
    }
}

/// The bytes of the host's caches `controller`'s watches hold, kept in its metric;
/// `Some` when that is more than its limit.
fn over_its_cache(ctx: &ControllerContext, controller: &PluginController) -> Option<usize> {
    let cached = controller.cache_bytes();
    let labels = PluginLabels {
        plugin: controller.registration().name.clone(),
    };
    let gauge = ctx.metrics.plugin_cache_bytes.get_or_create(&labels);
    gauge.set(cached as i64);
    (cached > controller.budget().watches.max_cache_bytes).then_some(cached)
}

/// The table's state and reason for `health`.
fn row_of(health: &Health) -> (State, Option<String>) {
    match health {
        Health::Running => (State::Running, None),
        Health::Degraded(why) => (State::Degraded, Some(why.clone())),
        Health::CrashLooping(why) => (State::CrashLooping, Some(why.clone())),
        Health::Forbidden(why) => (State::Forbidden, Some(why.clone())),
    }
}

/// Writes `controller`'s declared and granted rules into `file`'s row and the
/// missing-rights gauge (nothing when plugins share the host's identity).
pub(super) fn show_rights(
    ctx: &ControllerContext,
    table: &PluginTable,
    file: &str,
    controller: &PluginController,
) {
    let plugin = controller.registration().name.clone();
    let rights = ctx.reviewer.as_ref().zip(controller.review());
    let rights = rights.map(|(reviewer, review)| Rights::of(reviewer.user(&plugin), &review));
    if let Some(rights) = &rights {
        let labels = PluginLabels { plugin };
        let missing = ctx.metrics.missing_rights.get_or_create(&labels);
        missing.set(rights.denied.len() as i64);
    }
    table.set_rights(file, rights);
}
