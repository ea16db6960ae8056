//! The plugins the manager runs, by file (a file of the plugins directory, or
//! `wasmplugin/<name>`): each one's loads, start, upgrade, wait, health and stop.
//!
//! A file's version goes through a load task ([`Tasks`]), then, on the manager's
//! loop, becomes a running plugin, an upgrade, a waiting plugin or a recorded
//! failure, in one step and without waiting on the network. A waiting plugin (a
//! kind not served, a right not granted, rights that cannot be reviewed) tries again
//! by itself: for a kind, every retry interval; for rights, after a pause doubling up
//! to the access review interval, at once when RBAC changes for it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::load::{LoadJob, LoadOutcome, Pending, Ready, Source};
use super::rows::Rows;
use super::slot::{Files, Running, Waiting};
use super::tasks::{LoadDone, Tasks};
use super::wait_for::WaitFor;
use super::{PluginError, short};
use crate::controller::{ControllerContext, Health, PluginController};
use crate::status::PluginStatus;
use wcm_core::config::ManagerConfig;
use wcm_core::contract::Registration;
use wcm_core::rights::changes::Concerned;

/// Every plugin of the manager, and what is being done to each.
pub(super) struct Plugins {
    pub(super) config: ManagerConfig,
    ctx: ControllerContext,
    files: Files,
    rows: Rows,
    tasks: Tasks,
    /// Files of the first scan still loading, until none is; if then nothing runs,
    /// the log says so once.
    first_scan: Option<usize>,
    /// Files whose running version lost its parked code: their next load runs even if
    /// the bytes are the running version's.
    lost: BTreeSet<String>,
}

impl Plugins {
    /// No plugin yet; `first_scan` files are about to load.
    pub(super) fn new(
        config: ManagerConfig,
        ctx: ControllerContext,
        rows: Rows,
        tasks: Tasks,
        first_scan: usize,
    ) -> Plugins {
        Plugins {
            config,
            ctx,
            files: Files::default(),
            rows,
            tasks,
            first_scan: Some(first_scan),
            lost: BTreeSet::new(),
        }
    }

    /// Plugin files being loaded now.
    pub(super) fn loading(&self) -> usize {
        self.files.loads()
    }

    /// Whether anything of `file` runs, loads or waits.
    pub(super) fn known(&self, file: &str) -> bool {
        self.files.known(file)
    }

    /// Whether a plugin waits to start.
    pub(super) fn any_waiting(&self) -> bool {
        self.files.all_waiting().next().is_some()
    }

    /// The table's row of `file`.
    pub(super) fn row(&self, file: &str) -> Option<PluginStatus> {
        self.rows.row(file)
    }

    /// `file` is refused for `why`, without a load.
    pub(super) fn refuse(&self, file: &str, why: &str) {
        self.rows.failed(file, why);
    }

    /// Starts loading `file`'s version from `source` in a task of its own.
    pub(super) fn load(&mut self, file: &str, source: Source) {
        let job = LoadJob {
            source,
            file: file.to_string(),
            running_hash: self.files.running(file).map(|r| r.hash.clone()),
            reload: self.lost.remove(file),
        };
        let task = self.tasks.load(job);
        self.files.begin_load(file, task, false);
    }

    /// The next load to finish.
    pub(super) async fn next_load(&mut self) -> LoadDone {
        self.tasks.next_load().await
    }

    /// Takes a finished load's outcome: the file and whether its version runs now;
    /// `None` for a load aborted or replaced by a newer one (its outcome dropped).
    pub(super) fn finish_load(&mut self, done: LoadDone) -> Option<(String, bool)> {
        let (id, (file, outcome)) = match done {
            Ok(done) => done,
            Err(e) if e.is_cancelled() => return None,
            Err(e) => {
                tracing::error!(error = %e, "a plugin load task failed");
                return None;
            }
        };
        let retry = self.files.end_load(&file, id)?;
        if !retry {
            self.first_scan = self.first_scan.map(|n| n.saturating_sub(1));
        }
        let started = matches!(outcome, LoadOutcome::Ready(_));
        self.settle(&file, outcome, retry);
        self.after_first_scan();
        Some((file, started))
    }

    /// Applies the outcome of `file`'s load; `retry` if it was a waiting plugin's new
    /// try.
    fn settle(&mut self, file: &str, outcome: LoadOutcome, retry: bool) {
        match outcome {
            LoadOutcome::Unchanged { hash } => {
                tracing::debug!(file, hash = %short(&hash), "unchanged; nothing to do");
            }
            LoadOutcome::Ready(ready) => self.start_ready(file, *ready, retry),
            LoadOutcome::Waiting(pending) => self.wait(file, *pending, retry),
            LoadOutcome::Failed { hash, error } => self.failed(file, hash.as_deref(), &error),
        }
    }

    /// Starts a ready plugin, or upgrades the one its file runs (a file's plugin
    /// keeps its identity, the file's name, so a new version always takes over).
    fn start_ready(&mut self, file: &str, ready: Ready, retry: bool) {
        ready.observe(&self.ctx.metrics);
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
                running.controller.upgrade(&loaded, prepared);
                running.hash = loaded.hash.clone();
                running.health = Health::Running;
                Some(format!("{} {}", old.name, old.version))
            }
            None => {
                let controller = PluginController::start(&loaded, prepared, &self.ctx);
                let hash = loaded.hash.clone();
                let running = Running {
                    controller,
                    hash,
                    health: Health::Running,
                };
                self.files.started(file, running);
                None
            }
        };
        self.files.settled(file);
        let origin = format!("{:?}", loaded.origin).to_lowercase();
        let what = match (previous.is_some(), retry) {
            (true, _) => "plugin upgraded",
            (false, true) => "plugin loaded: what it waited for (a kind, a right) is there now",
            (false, false) => "plugin loaded",
        };
        tracing::info!(file, plugin = %registration.name, version = %registration.version,
            contract = %loaded.code.contract(),
            previous = %previous.as_deref().unwrap_or("-"), hash = %short(&loaded.hash),
            origin,
            read = ?loaded.read, compile_wait = ?loaded.compile_wait, compile = ?loaded.compile,
            link = ?loaded.link,
            register = ?register, review = ?review, total = ?began.elapsed(), "{what}");
        if let Some(running) = self.files.running(file) {
            self.rows.running(file, running, &loaded);
        }
    }

    /// Keeps `file`'s registered plugin until what it waits for is there; `again` if
    /// it waited already.
    fn wait(&mut self, file: &str, pending: Pending, again: bool) {
        let Pending {
            loaded,
            registration,
            why,
        } = pending;
        let upgrade = self.files.running(file).is_some();
        self.rows.waiting(file, &registration, &why, again, upgrade);
        let pause = self.pause_before_retry(file, &why);
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

    /// Records a failed load: a running version keeps running.
    fn failed(&self, file: &str, hash: Option<&str>, error: &PluginError) {
        let hash = hash.map_or("-", short);
        self.rows
            .load_failed(file, self.files.running(file), hash, error);
    }

    /// Tries again to start every waiting plugin whose pause is over, each in a task
    /// of its own; those that still cannot start come back waiting.
    pub(super) fn retry_waiting(&mut self) {
        for file in self.files.due(Instant::now()) {
            let Some(waiting) = self.files.take_waiting(&file) else {
                continue;
            };
            let replaces = self.files.running(&file).is_some();
            let task = self.tasks.retry(&file, waiting, replaces);
            self.files.begin_load(&file, task, true);
        }
    }

    /// Reviews the rights of every plugin `concerned` names, now: a running one's
    /// review loop is asked for a review, one waiting for a right tries again.
    pub(super) fn rights_changed(&mut self, concerned: &Concerned) {
        let Some(accounts) = self.ctx.identities.accounts() else {
            return;
        };
        let concerns = |plugin: &str| match concerned {
            Concerned::Everyone => true,
            Concerned::Accounts(names) => names.contains(&accounts.name(plugin)),
        };
        for (_, running) in self.files.all_running() {
            if concerns(&running.controller.registration().name) {
                running.controller.review_soon();
            }
        }
        let waiting: Vec<String> = (self.files.all_waiting())
            .filter(|(_, w)| w.for_rights && concerns(&w.registration.name))
            .map(|(file, _)| file.clone())
            .collect();
        if waiting.is_empty() {
            return;
        }
        tracing::debug!(files = ?waiting, "RBAC changed; plugins waiting for a right try again now");
        let now = Instant::now();
        for file in &waiting {
            self.files.hurry(file, now);
        }
        self.retry_waiting();
    }

    /// Drops what `file`'s newest version was doing: its load in flight (a newer
    /// change replaces it) or its wait to start.
    pub(super) fn drop_next(&mut self, file: &str) {
        let (load, waiting) = self.files.changed(file);
        if let Some(waiting) = waiting {
            self.forget_waiting(file, &waiting.registration);
        }
        if let Some(previous) = load {
            previous.abort();
            tracing::debug!(file, "a newer change replaces the load in flight");
        }
    }

    /// Forgets `file`'s waiting plugin's series, unless its running version has the
    /// same name.
    fn forget_waiting(&mut self, file: &str, waiting: &Registration) {
        let running = self.files.running(file);
        if running.is_none_or(|r| r.controller.registration().name != waiting.name) {
            self.ctx.metrics.forget_plugin(&waiting.name);
        }
    }

    /// Stops everything of `file` (removed, or its resource deleted or paused): no
    /// new reconciles; in-flight ones finish or are cut at their deadline; informers
    /// no one else uses are released.
    pub(super) fn stop(&mut self, file: &str) {
        self.drop_next(file);
        self.rows.remove(file);
        let Some(running) = self.files.stop(file) else {
            return;
        };
        let reg = running.controller.registration().clone();
        tracing::info!(file, plugin = %reg.name, version = %reg.version,
            "plugin file removed; stopping the plugin");
        let (file, hash) = (file.to_string(), running.hash);
        self.tasks.stop(running.controller, move || {
            tracing::info!(file, plugin = %reg.name, version = %reg.version,
                hash = %short(&hash), "plugin removed");
        });
    }

    /// Looks at every running plugin: its metrics, rights, Lease holder and health
    /// into its row; one over its cache limit is stopped. Returns the files whose
    /// running version lost its parked code, to load again.
    pub(super) fn refresh_health(&mut self) -> Vec<String> {
        let mut over_cache = Vec::new();
        for (file, running) in self.files.all_running_mut() {
            if running.controller.code_lost() && self.lost.insert(file.clone()) {
                tracing::warn!(file, plugin = %running.controller.registration().name,
                    "the plugin's compiled code is gone from the compile cache; loading it again");
            }
            running.controller.refresh_metrics();
            running.controller.replay_reopened();
            if let Some(cached) = self.rows.cache_over_limit(&running.controller) {
                over_cache.push((file.clone(), cached));
                continue;
            }
            self.rows.rights(file, &running.controller);
            let plugin = running.controller.registration().name.clone();
            self.rows.lease(file, &plugin);
            let health = running.controller.health();
            if health == running.health {
                continue;
            }
            if health == Health::Running {
                running.controller.recovered();
            }
            self.rows.health(file, &plugin, &running.health, &health);
            running.health = health;
        }
        for (file, cached) in over_cache {
            self.stop_over_cache(&file, cached);
        }
        (self.lost.iter())
            .filter(|file| !self.files.is_loading(file))
            .cloned()
            .collect()
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
        self.rows.failed(file, &why);
        self.tasks.stop(running.controller, move || {
            tracing::info!(plugin, "plugin over its cache limit stopped");
        });
    }

    /// Ready once the first scan's files are loaded (or failed), every informer a
    /// running plugin needs has listed, unless it fails (that plugin is `degraded`),
    /// and, with a Lease per plugin, the group knows what this replica runs.
    pub(super) fn readiness(&self) -> Result<(), String> {
        if let Some(left) = self.first_scan.filter(|n| *n > 0) {
            return Err(format!("loading {left} plugin file(s) found at start"));
        }
        let listing: Vec<&str> = (self.files.all_running())
            .filter(|(_, r)| r.controller.syncing())
            .map(|(_, r)| r.controller.registration().name.as_str())
            .collect();
        if !listing.is_empty() {
            return Err(format!("informers of {} still listing", listing.join(", ")));
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

    /// Whether this replica acts for every plugin.
    pub(super) fn leads_all(&self) -> bool {
        self.ctx.leader.leads_all()
    }

    /// Whether this replica reports on `plugin` (it acts for it).
    pub(super) fn reports_on(&self, plugin: &str) -> bool {
        self.ctx.leader.reports_on(plugin)
    }

    /// Once the first scan's files are all loaded (or failed): gives back the heap
    /// the loads freed and warns if nothing runs.
    pub(super) fn after_first_scan(&mut self) {
        if self.first_scan != Some(0) {
            return;
        }
        self.first_scan = None;
        wcm_core::runtime::give_back_freed_memory();
        let idle = self.files.all_running().next().is_none();
        if idle && !self.any_waiting() {
            tracing::warn!(dir = %self.config.plugins_dir.display(), "no plugin is running");
        }
    }

    /// Stops every plugin: loads in flight are dropped, no new reconciles start,
    /// in-flight ones get the grace period.
    pub(super) async fn shutdown(mut self) {
        let grace = self.config.shutdown_grace;
        let running = self.files.stop_all();
        self.tasks.shutdown_loads().await;
        let stops = running.into_iter().map(|r| r.controller.stop(grace));
        futures::future::join_all(stops).await;
        self.tasks.drain_stops().await;
    }
}
