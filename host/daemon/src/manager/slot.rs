//! What the manager knows of each plugin file, in one map, and every change of it.
//!
//! A file has at most one running version and, beside it, what its newest version is
//! doing: nothing, being loaded (one load at a time; a newer change replaces it), or
//! waiting to start (a kind not served yet, a right not granted yet). An upgrade is
//! a running version with a newer one loading or waiting. Keeping both in one slot
//! per file, changed only here, keeps them consistent: a file cannot be loading and
//! waiting at once, a waiting plugin's pause for rights goes with it, and a file with
//! nothing left is forgotten.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::task::{AbortHandle, Id};

use crate::controller::{Health, PluginController};
use wcm_core::contract::Registration;
use wcm_core::runtime::Loaded;

/// A file whose plugin runs.
pub(super) struct Running {
    pub controller: PluginController,
    /// The content hash of its version.
    pub hash: String,
    /// The health last written into the table.
    pub health: Health,
}

/// A registered plugin whose start waits, and when it tries again.
pub(super) struct Waiting {
    /// The loaded code, kept so a retry need not compile again.
    pub loaded: Loaded,
    /// What it registered.
    pub registration: Registration,
    /// Not tried again before this.
    pub not_before: Instant,
    /// It waits for a right (or a review of its rights), not for a kind.
    pub for_rights: bool,
}

/// What a file's newest version is doing.
enum Next {
    /// Nothing: the running version, if any, is the newest.
    Idle,
    /// A load task in flight; `retry` when it is a waiting plugin's new try.
    Loading { task: AbortHandle, retry: bool },
    /// Registered, and waiting to start.
    Waiting(Box<Waiting>),
}

/// One plugin file.
struct Slot {
    running: Option<Running>,
    next: Next,
    /// The last pause before a retry for rights, doubled at each one; gone once the
    /// plugin starts or its file changes.
    rights_pause: Option<Duration>,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            running: None,
            next: Next::Idle,
            rights_pause: None,
        }
    }
}

/// Every plugin file the manager knows, by name.
#[derive(Default)]
pub(super) struct Files(BTreeMap<String, Slot>);

impl Files {
    fn slot(&mut self, file: &str) -> &mut Slot {
        self.0.entry(file.to_string()).or_default()
    }

    /// Forgets `file` if nothing of it is left.
    fn tidy(&mut self, file: &str) {
        let empty =
            (self.0.get(file)).is_some_and(|s| s.running.is_none() && matches!(s.next, Next::Idle));
        if empty {
            self.0.remove(file);
        }
    }

    /// Whether anything of `file` runs, loads or waits.
    pub fn known(&self, file: &str) -> bool {
        self.0.contains_key(file)
    }

    /// The version running from `file`.
    pub fn running(&self, file: &str) -> Option<&Running> {
        self.0.get(file)?.running.as_ref()
    }

    /// The version running from `file`, to change.
    pub fn running_mut(&mut self, file: &str) -> Option<&mut Running> {
        self.0.get_mut(file)?.running.as_mut()
    }

    /// Every running version, by file.
    pub fn all_running(&self) -> impl Iterator<Item = (&String, &Running)> {
        (self.0.iter()).filter_map(|(file, s)| Some((file, s.running.as_ref()?)))
    }

    /// Every running version, by file, to change.
    pub fn all_running_mut(&mut self) -> impl Iterator<Item = (&String, &mut Running)> {
        (self.0.iter_mut()).filter_map(|(file, s)| Some((file, s.running.as_mut()?)))
    }

    /// Every waiting plugin, by file.
    pub fn all_waiting(&self) -> impl Iterator<Item = (&String, &Waiting)> {
        self.0.iter().filter_map(|(file, s)| match &s.next {
            Next::Waiting(waiting) => Some((file, &**waiting)),
            _ => None,
        })
    }

    /// Whether a load of `file` is in flight.
    pub fn is_loading(&self, file: &str) -> bool {
        (self.0.get(file)).is_some_and(|s| matches!(s.next, Next::Loading { .. }))
    }

    /// How many loads are in flight.
    pub fn loads(&self) -> usize {
        self.0.keys().filter(|file| self.is_loading(file)).count()
    }

    /// `file`'s new load, `task`; a waiting plugin's retry if `retry`.
    pub fn begin_load(&mut self, file: &str, task: AbortHandle, retry: bool) {
        self.slot(file).next = Next::Loading { task, retry };
    }

    /// `file` changed or went: its load in flight (returned, to abort) and its
    /// waiting plugin (returned, to forget) are dropped, and its pause for rights.
    pub fn changed(&mut self, file: &str) -> (Option<AbortHandle>, Option<Waiting>) {
        let Some(slot) = self.0.get_mut(file) else {
            return (None, None);
        };
        slot.rights_pause = None;
        let dropped = match std::mem::replace(&mut slot.next, Next::Idle) {
            Next::Idle => (None, None),
            Next::Loading { task, .. } => (Some(task), None),
            Next::Waiting(waiting) => (None, Some(*waiting)),
        };
        self.tidy(file);
        dropped
    }

    /// The load of `file` whose task is `id` ended: whether it was a retry, or
    /// `None` if a newer load replaced it (its outcome is then dropped).
    pub fn end_load(&mut self, file: &str, id: Id) -> Option<bool> {
        let slot = self.0.get_mut(file)?;
        let Next::Loading { task, retry } = &slot.next else {
            return None;
        };
        if task.id() != id {
            return None;
        }
        let retry = *retry;
        slot.next = Next::Idle;
        self.tidy(file);
        Some(retry)
    }

    /// `file`'s newest version waits.
    pub fn wait(&mut self, file: &str, waiting: Waiting) {
        self.slot(file).next = Next::Waiting(Box::new(waiting));
    }

    /// The files whose waiting plugin may try again at `now`.
    pub fn due(&self, now: Instant) -> Vec<String> {
        (self.all_waiting())
            .filter(|(_, w)| w.not_before <= now)
            .map(|(file, _)| file.clone())
            .collect()
    }

    /// Lets `file`'s waiting plugin try again at once, its pause for rights reset.
    pub fn hurry(&mut self, file: &str, now: Instant) {
        if let Some(slot) = self.0.get_mut(file) {
            slot.rights_pause = None;
            if let Next::Waiting(waiting) = &mut slot.next {
                waiting.not_before = now;
            }
        }
    }

    /// `file`'s waiting plugin, taken out for a retry (its load begins next).
    pub fn take_waiting(&mut self, file: &str) -> Option<Waiting> {
        let slot = self.0.get_mut(file)?;
        match std::mem::replace(&mut slot.next, Next::Idle) {
            Next::Waiting(waiting) => Some(*waiting),
            other => {
                slot.next = other;
                None
            }
        }
    }

    /// The pause before `file`'s next try for rights: `first`, then doubling up to
    /// `longest`.
    pub fn rights_pause(&mut self, file: &str, first: Duration, longest: Duration) -> Duration {
        let slot = self.slot(file);
        let pause = match slot.rights_pause {
            Some(last) => last.saturating_mul(2).min(longest),
            None => first,
        };
        slot.rights_pause = Some(pause);
        pause
    }

    /// `running` runs from `file` now (a first start; an upgrade changes the running
    /// version in place).
    pub fn started(&mut self, file: &str, running: Running) {
        self.slot(file).running = Some(running);
    }

    /// `file`'s version started or was upgraded: no pause for rights is left.
    pub fn settled(&mut self, file: &str) {
        if let Some(slot) = self.0.get_mut(file) {
            slot.rights_pause = None;
        }
    }

    /// Takes `file`'s running version out, to stop it.
    pub fn stop(&mut self, file: &str) -> Option<Running> {
        let running = self.0.get_mut(file)?.running.take();
        self.tidy(file);
        running
    }

    /// Takes every running version out, to stop them all.
    pub fn stop_all(&mut self) -> Vec<Running> {
        let all = self
            .0
            .values_mut()
            .filter_map(|s| s.running.take())
            .collect();
        self.0.clear();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(set: &mut tokio::task::JoinSet<()>) -> AbortHandle {
        set.spawn(std::future::pending())
    }

    #[tokio::test]
    async fn a_newer_load_of_a_file_replaces_the_one_in_flight() {
        let (mut tasks, mut files) = (tokio::task::JoinSet::new(), Files::default());
        let first = task(&mut tasks);
        files.begin_load("a.wasm", first.clone(), false);
        let (replaced, waiting) = files.changed("a.wasm");
        assert_eq!(replaced.map(|t| t.id()), Some(first.id()));
        assert!(waiting.is_none());
        let second = task(&mut tasks);
        files.begin_load("a.wasm", second.clone(), false);
        assert_eq!(files.loads(), 1);
        assert_eq!(files.end_load("a.wasm", first.id()), None, "stale outcome");
        assert_eq!(files.end_load("a.wasm", second.id()), Some(false));
        assert_eq!(files.loads(), 0);
        assert!(files.0.is_empty(), "a file with nothing left is forgotten");
    }

    #[tokio::test]
    async fn a_retry_is_told_apart_and_a_removed_file_keeps_nothing() {
        let (mut tasks, mut files) = (tokio::task::JoinSet::new(), Files::default());
        let retry = task(&mut tasks);
        files.begin_load("b.wasm", retry.clone(), true);
        assert_eq!(files.end_load("b.wasm", retry.id()), Some(true));
        let first = Duration::from_secs(1);
        let longest = Duration::from_secs(3);
        let pauses: Vec<Duration> = (0..4)
            .map(|_| files.rights_pause("b.wasm", first, longest))
            .collect();
        assert_eq!(pauses, [1, 2, 3, 3].map(Duration::from_secs));
        files.changed("b.wasm");
        assert_eq!(files.rights_pause("b.wasm", first, longest), first);
        assert!(files.stop("b.wasm").is_none());
        assert!(files.0.is_empty());
    }
}
