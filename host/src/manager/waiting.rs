//! Plugins that loaded and registered but cannot start yet: a kind they need is not
//! served (typically a custom resource whose CRD is not installed), their
//! ServiceAccount may not list or watch what they watch, or their rights cannot be
//! reviewed. They are kept, shown as `waiting` or `forbidden`, and started once the
//! cause is gone, without a restart. A new version of a running plugin that needs a
//! right not granted yet waits the same way while the old version runs on. A plugin refused for its rights tries again
//! after a pause that doubles up to the access review interval, so a plugin nobody
//! grants costs a few SubjectAccessReviews a minute, not one every few seconds.

use std::time::{Duration, Instant};

use crate::contract::Registration;
use crate::runtime::Loaded;
use crate::status::{PluginStatus, Rights, State};

use super::wait_for::WaitFor;
use super::{Manager, load};

/// A registered plugin whose start waits, and when it tries again.
pub(super) struct Waiting {
    loaded: Loaded,
    registration: Registration,
    not_before: Instant,
    /// It waits for a right (or a review of its rights), not for a kind.
    for_rights: bool,
}

impl Manager {
    /// Keeps `file`'s loaded plugin until what it waits for is there.
    pub(super) fn wait_for(
        &mut self,
        file: &str,
        loaded: &Loaded,
        registration: Registration,
        why: &WaitFor,
    ) {
        let (state, reason) = why.row();
        let plugin = registration.name.clone();
        let again = self.retrying.remove(file);
        let shown = self.table.reason_of(file);
        if again && shown.as_deref() == Some(reason.as_str()) {
            tracing::debug!(file, plugin, reason, "still waiting");
        } else {
            tracing::warn!(file, plugin, version = %registration.version, reason,
                "{}; it starts by itself once this is resolved", why.summary());
        }
        let pause = self.pause_before_retry(file, why);
        if self.running.contains_key(file) {
            // An upgrade waiting for rights: the running version's row stays.
            let upgrade = format!("upgrade to {} waits: {reason}", registration.version);
            self.table.set_reason(file, Some(upgrade));
        } else {
            let row = PluginStatus::waiting(file, (&plugin, &registration.version), state, &reason)
                .with_registered_as(registration.registered_as.as_deref());
            self.table.set(row);
        }
        if let (WaitFor::Rights(e), false) = (why, self.running.contains_key(file)) {
            let rights = Rights::of(e.user.clone(), &e.review);
            self.table.set_rights(file, Some(rights));
            self.ctx
                .metrics
                .set_plugin_state(&plugin, State::Forbidden.name());
            let labels = crate::metrics::PluginLabels { plugin };
            let missing = self.ctx.metrics.missing_rights.get_or_create(&labels);
            missing.set(e.review.denied.len() as i64);
        }
        let waiting = Waiting {
            loaded: loaded.clone(),
            registration,
            not_before: Instant::now() + pause,
            for_rights: !matches!(why, WaitFor::Kind(_)),
        };
        self.waiting.insert(file.to_string(), waiting);
    }

    /// The pause before `file`'s next try: the retry interval for a missing kind;
    /// for rights, doubling from it up to the access review interval.
    fn pause_before_retry(&mut self, file: &str, why: &WaitFor) -> Duration {
        let first = self.config.missing_kind_retry;
        if let WaitFor::Kind(_) = why {
            return first;
        }
        let longest = self.config.access_review_interval.max(first);
        let pause = match self.rights_backoff.get(file) {
            Some(last) => last.saturating_mul(2).min(longest),
            None => first,
        };
        self.rights_backoff.insert(file.to_string(), pause);
        pause
    }

    /// Tries again to start every waiting plugin whose pause is over, each in a task
    /// of its own; those that still cannot start come back waiting.
    pub(super) fn retry_waiting(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = (self.waiting.iter())
            .filter(|(_, w)| w.not_before <= now)
            .map(|(file, _)| file.clone())
            .collect();
        for file in due {
            let Some(Waiting {
                loaded,
                registration,
                ..
            }) = self.waiting.remove(&file)
            else {
                continue;
            };
            let ctx = self.ctx.clone();
            let task_file = file.clone();
            let replaces = self.running.contains_key(&file);
            let handle = self.loads.spawn(async move {
                let began = std::time::Instant::now();
                let outcome =
                    load::prepare(loaded, registration, &ctx, replaces, Duration::ZERO, began)
                        .await;
                (task_file, outcome)
            });
            self.retrying.insert(file.clone());
            self.loading.insert(file, handle);
        }
    }

    /// Files of plugins waiting for a right whose plugin `concerns` names.
    pub(super) fn waiting_for_rights(&self, concerns: &dyn Fn(&str) -> bool) -> Vec<String> {
        (self.waiting.iter())
            .filter(|(_, w)| w.for_rights && concerns(&w.registration.name))
            .map(|(file, _)| file.clone())
            .collect()
    }

    /// Lets `files`' waiting plugins try again now, whatever their backoff.
    pub(super) fn retry_waiting_now(&mut self, files: &[String]) {
        let at = Instant::now();
        for file in files {
            if let Some(waiting) = self.waiting.get_mut(file) {
                waiting.not_before = at;
            }
        }
        self.retry_waiting();
    }

    /// Forgets `file`'s waiting plugin (the file changed or went): its series go
    /// unless the file's running version has the same name.
    pub(super) fn forget_waiting(&mut self, file: &str) {
        self.rights_backoff.remove(file);
        let Some(waiting) = self.waiting.remove(file) else {
            return;
        };
        let name = &waiting.registration.name;
        let running = self.running.get(file);
        if running.is_none_or(|r| &r.controller.registration().name != name) {
            self.ctx.metrics.forget_plugin(name);
        }
    }
}
