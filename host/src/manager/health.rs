//! Brings each running plugin's health into the table, the state metric and the log
//! when it changes: `degraded` while a watch it needs fails, `crash-looping` while
//! its reconciles keep trapping, `running` again when that ends.

use super::Manager;
use crate::controller::Health;
use crate::status::State;

impl Manager {
    /// Looks at every running plugin and records the ones whose health changed. A
    /// change of state is logged; newer details of the same state (another crash,
    /// another API error) only update the table.
    pub(super) fn refresh_health(&mut self) {
        for (file, running) in &mut self.running {
            running.controller.refresh_metrics();
            let health = running.controller.health();
            if health == running.health {
                continue;
            }
            let plugin = running.controller.registration().name.clone();
            let (state, reason) = row_of(&health);
            if health.name() != running.health.name() {
                let was = running.health.name();
                match &health {
                    Health::Running => tracing::info!(file, plugin, was, "plugin recovered"),
                    Health::Degraded(why) => {
                        tracing::warn!(file, plugin, why, "plugin degraded: a watch it needs fails")
                    }
                    Health::CrashLooping(why) => {
                        tracing::warn!(file, plugin, why, "plugin crash-looping")
                    }
                }
                self.ctx.metrics.set_plugin_state(&plugin, health.name());
            }
            self.table.set_health(file, state, reason);
            running.health = health;
        }
        self.probes.set_ready(self.readiness());
    }

    /// Ready once the first scan's files are loaded (or failed) and every informer a
    /// running plugin needs has listed, unless it fails (that plugin is `degraded`).
    fn readiness(&self) -> Result<(), String> {
        if let Some(left) = self.first_scan.filter(|n| *n > 0) {
            return Err(format!("loading {left} plugin file(s) found at start"));
        }
        let waiting: Vec<&str> = self
            .running
            .values()
            .filter(|r| r.controller.syncing())
            .map(|r| r.controller.registration().name.as_str())
            .collect();
        match waiting.is_empty() {
            true => Ok(()),
            false => Err(format!("informers of {} still listing", waiting.join(", "))),
        }
    }
}

/// The table's state and reason for `health`.
fn row_of(health: &Health) -> (State, Option<String>) {
    match health {
        Health::Running => (State::Running, None),
        Health::Degraded(why) => (State::Degraded, Some(why.clone())),
        Health::CrashLooping(why) => (State::CrashLooping, Some(why.clone())),
    }
}
