//! Plugins that loaded and registered but cannot start yet: a kind they need is not
//! served (typically a custom resource whose CRD is not installed), their
//! ServiceAccount may not list or watch what they watch, or their rights cannot be
//! reviewed. They are kept, shown as `waiting` or `forbidden`, and started once the
//! cause is gone, without a restart. A new version of a running plugin that needs a
//! right not granted yet waits the same way while the old version runs on. A plugin refused for its rights tries again
//! after a pause that doubles up to the access review interval, so a plugin nobody
//! grants costs a few SubjectAccessReviews a minute, not one every few seconds.

use std::time::{Duration, Instant};

use crate::status::{PluginStatus, Rights};
use wcm_core::contract::Registration;
use wcm_core::runtime::Loaded;

use super::slot::Waiting;
use super::wait_for::WaitFor;
use super::{Manager, load};

impl Manager {
    /// Keeps `file`'s loaded plugin until what it waits for is there; `again` if
    /// this was a retry of a plugin that waited already.
    pub(super) fn wait_for(
        &mut self,
        file: &str,
        loaded: Loaded,
        registration: Registration,
        why: &WaitFor,
        again: bool,
    ) {
        let (state, reason) = why.row();
        let plugin = registration.name.clone();
        let shown = self.table.reason_of(file);
        if again && shown.as_deref() == Some(reason.as_str()) {
            tracing::debug!(file, plugin, reason, "still waiting");
        } else {
            tracing::warn!(file, plugin, version = %registration.version, reason,
                "{}; it starts by itself once this is resolved", why.summary());
        }
        let pause = self.pause_before_retry(file, why);
        let upgrade = self.files.running(file).is_some();
        if upgrade {
            // An upgrade waiting for rights: the running version's row stays.
            let upgrade = format!("upgrade to {} waits: {reason}", registration.version);
            self.table.set_reason(file, Some(upgrade));
        } else {
            let row = PluginStatus::waiting(file, (&plugin, &registration.version), state, &reason)
                .with_registered_as(registration.registered_as.as_deref());
            self.table.set(row);
        }
        if let (WaitFor::Rights(e), false) = (why, upgrade) {
            let rights = Rights::of(e.user.clone(), &e.review);
            self.table.set_rights(file, Some(rights));
            let labels = wcm_core::metrics::PluginLabels { plugin };
            let missing = self.ctx.metrics.missing_rights.get_or_create(&labels);
            missing.set(e.review.denied.len() as i64);
        }
        let waiting = Waiting {
            loaded,
            registration,
            not_before: Instant::now() + pause,
            for_rights: !matches!(why, WaitFor::Kind(_)),
        };
        self.files.wait(file, waiting);
    }

    /// The pause before `file`'s next try: the retry interval for a missing kind;
    /// for rights, doubling from it up to the access review interval.
    fn pause_before_retry(&mut self, file: &str, why: &WaitFor) -> Duration {
        let first = self.config.missing_kind_retry;
        if let WaitFor::Kind(_) = why {
            return first;
        }
        let longest = self.config.access_review_interval.max(first);
        self.files.rights_pause(file, first, longest)
    }

    /// Tries again to start every waiting plugin whose pause is over, each in a task
    /// of its own; those that still cannot start come back waiting.
    pub(super) fn retry_waiting(&mut self) {
        for file in self.files.due(Instant::now()) {
            let Some(Waiting {
                loaded,
                registration,
                ..
            }) = self.files.take_waiting(&file)
            else {
                continue;
            };
            let ctx = self.ctx.clone();
            let task_file = file.clone();
            let replaces = self.files.running(&file).is_some();
            let handle = self.loads.spawn(async move {
                let began = std::time::Instant::now();
                let outcome =
                    load::prepare(loaded, registration, &ctx, replaces, Duration::ZERO, began)
                        .await;
                (task_file, outcome)
            });
            self.files.begin_load(&file, handle, true);
        }
    }

    /// Files of plugins waiting for a right whose plugin `concerns` names.
    pub(super) fn waiting_for_rights(&self, concerns: &dyn Fn(&str) -> bool) -> Vec<String> {
        (self.files.all_waiting())
            .filter(|(_, w)| w.for_rights && concerns(&w.registration.name))
            .map(|(file, _)| file.clone())
            .collect()
    }

    /// Lets `files`' waiting plugins try again now, whatever their backoff.
    pub(super) fn retry_waiting_now(&mut self, files: &[String]) {
        let at = Instant::now();
        for file in files {
            self.files.hurry(file, at);
        }
        self.retry_waiting();
    }

    /// Forgets `file`'s waiting plugin (the file changed or went): its series go
    /// unless the file's running version has the same name.
    pub(super) fn forget_waiting(&mut self, file: &str, waiting: &Waiting) {
        let name = &waiting.registration.name;
        let running = self.files.running(file);
        if running.is_none_or(|r| &r.controller.registration().name != name) {
            self.ctx.metrics.forget_plugin(name);
        }
    }
}
