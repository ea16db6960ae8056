//! The quick half of loading a plugin file, on the manager's loop: what a finished
//! load task found becomes a running plugin, an upgrade, a replacement, a waiting
//! plugin or a recorded failure. Nothing here waits on the network.

use super::load::{LoadOutcome, Pending, Ready};
use super::{Manager, PluginError, Running, short};
use crate::controller::{Health, PluginController};
use crate::status::{Limits, PluginStatus};
use wcm_core::metrics::LoadStepLabels;
use wcm_core::runtime::Loaded;

impl Manager {
    /// Applies the outcome of `file`'s load; `retry` if it was a waiting plugin's new
    /// try.
    pub(super) fn settle(&mut self, file: &str, outcome: LoadOutcome, retry: bool) {
        match outcome {
            LoadOutcome::Unchanged { hash } => {
                tracing::debug!(file, hash = %short(&hash), "unchanged; nothing to do");
            }
            LoadOutcome::Ready(ready) => self.start_ready(file, *ready, retry),
            LoadOutcome::Waiting(pending) => {
                let Pending {
                    loaded,
                    registration,
                    why,
                } = *pending;
                self.wait_for(file, loaded, registration, &why, retry)
            }
            LoadOutcome::Failed { hash, error } => self.failed(file, hash.as_deref(), &error),
        }
    }

    /// Starts a ready plugin, or upgrades the one its file runs (a file's plugin
    /// keeps its identity, the file's name, so a new version always takes over).
    fn start_ready(&mut self, file: &str, ready: Ready, retry: bool) {
        let Ready {
            loaded,
            prepared,
            register,
            began,
        } = ready;
        let registration = prepared.registration().clone();
        let review = prepared.review_took();
        let previous = match self.files.running_mut(file) {
            Some(running) => {
                let old = running.controller.registration().clone();
                running.controller.upgrade(loaded.code.clone(), prepared);
                running.hash = loaded.hash.clone();
                running.health = Health::Running;
                Some(format!("{} {}", old.name, old.version))
            }
            None => {
                let controller = PluginController::start(loaded.code.clone(), prepared, &self.ctx);
                let fresh = Running {
                    controller,
                    hash: loaded.hash.clone(),
                    health: Health::Running,
                };
                self.files.started(file, fresh);
                None
            }
        };
        let steps = [
            ("read", loaded.read),
            ("compile_wait", loaded.compile_wait),
            ("compile", loaded.compile),
            ("link", loaded.link),
            ("register", register),
            ("review", review),
        ];
        for (step, took) in steps {
            let labels = LoadStepLabels {
                step: step.to_string(),
            };
            let histogram = self.ctx.metrics.load_seconds.get_or_create(&labels);
            histogram.observe(took.as_secs_f64());
        }
        let origin = format!("{:?}", loaded.origin).to_lowercase();
        self.files.settled(file);
        let what = match (previous.is_some(), retry) {
            (true, _) => "plugin upgraded",
            (false, true) => "plugin loaded: what it waited for (a kind, a right) is there now",
            (false, false) => "plugin loaded",
        };
        tracing::info!(file, plugin = %registration.name, version = %registration.version,
            contract = %loaded.code.contract(),
            previous = %previous.as_deref().unwrap_or("-"), hash = %short(&loaded.hash), origin,
            read = ?loaded.read, compile_wait = ?loaded.compile_wait, compile = ?loaded.compile,
            link = ?loaded.link,
            register = ?register, review = ?review, total = ?began.elapsed(), "{what}");
        self.show_running(file, &loaded);
    }

    /// Writes the running row of `file`, with its limits.
    pub(super) fn show_running(&self, file: &str, loaded: &Loaded) {
        let Some(running) = self.files.running(file) else {
            return;
        };
        let controller = &running.controller;
        let reg = controller.registration();
        let limits = Limits {
            reconcile_timeout_ms: self.config.limits.reconcile_timeout.as_millis() as u64,
            max_memory_bytes: self.config.limits.max_memory_bytes,
            concurrent_reconciles: controller.concurrency(),
            budget: controller.budget().clone(),
        };
        let row = PluginStatus::running(file, &reg.name, &reg.version, &loaded.hash)
            .with_registered_as(reg.registered_as.as_deref());
        let contract = loaded.code.contract().to_string();
        self.table
            .set(row.with_limits(limits).with_contract(contract));
        super::health_reports::show_rights(&self.ctx, &self.table, file, controller);
    }

    /// Records a failure: a running version keeps running and its row notes the
    /// refused upgrade; otherwise the file is marked failed.
    pub(super) fn failed(&self, file: &str, hash: Option<&str>, error: &PluginError) {
        let hash = hash.map_or("-", short);
        if let Some(running) = self.files.running(file) {
            let reg = running.controller.registration();
            tracing::error!(file, hash, %error, running = %format!("{} {}", reg.name, reg.version),
                running_hash = %short(&running.hash),
                "plugin upgrade failed; the running version keeps running");
            self.table
                .set_reason(file, Some(format!("upgrade refused: {error}")));
        } else {
            tracing::error!(file, hash, %error, "plugin failed to load");
            self.table
                .set(PluginStatus::failed(file, &error.to_string()));
        }
    }
}
