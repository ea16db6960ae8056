//! One `WasmPlugin` as the manager follows it: its spec as last seen, the version that
//! runs, when a failed pull is tried again, why the host refuses it, and its status
//! as a projection of all that, written only when it changed.

use std::time::{Duration, Instant};

use crate::status::PluginStatus;
use crate::wasmplugin::{Facts, Pull, WasmPlugin, WasmPluginSpec, WasmPluginStatus, status_of};

/// First pause before a failed pull is tried again; doubled up to [`MAX_PULL_PAUSE`].
const FIRST_PULL_PAUSE: Duration = Duration::from_secs(5);
/// Longest pause between tries of a failing pull.
const MAX_PULL_PAUSE: Duration = Duration::from_secs(300);

/// One resource as last seen.
pub(super) struct Followed {
    pub spec: WasmPluginSpec,
    pub generation: Option<i64>,
    /// Its status as last seen or written: the pin, and conditions' transition times.
    pub status: Option<WasmPluginStatus>,
    /// When a failed pull is tried again, and the pause after that.
    pub retry: Option<(Instant, Duration)>,
    /// The pinned reference and digest of the version running.
    pub running: Option<(String, String)>,
    /// Why the host refuses the resource itself (condition reason, message).
    pub refused: Option<(&'static str, String)>,
}

impl Followed {
    /// `plugin` as just seen, after `previous`; and whether its load starts afresh
    /// (its spec changed, or it was refused until now; our own status write is no
    /// such change).
    pub(super) fn applied(plugin: &WasmPlugin, previous: Option<Followed>) -> (Followed, bool) {
        let spec_changed =
            (previous.as_ref()).is_none_or(|k| k.spec != plugin.spec || k.refused.is_some());
        let running = previous.as_ref().and_then(|p| p.running.clone());
        let known = Followed {
            spec: plugin.spec.clone(),
            generation: plugin.metadata.generation,
            status: plugin.status.clone(),
            retry: previous.filter(|_| !spec_changed).and_then(|p| p.retry),
            running: running.filter(|_| !plugin.spec.paused),
            refused: None,
        };
        (known, spec_changed)
    }

    /// A resource of `generation` the host refuses for `reason`, `why`; its last
    /// status kept for the conditions' transition times.
    pub(super) fn refused(
        generation: Option<i64>,
        status: Option<WasmPluginStatus>,
        reason: &'static str,
        why: String,
    ) -> Followed {
        Followed {
            spec: WasmPluginSpec::default(),
            generation,
            status,
            retry: None,
            running: None,
            refused: Some((reason, why)),
        }
    }

    /// Its load settled with `pull` (`started`: its version runs now): the version
    /// running noted, a failed pull scheduled again with a doubling pause.
    pub(super) fn settled(&mut self, pull: &Pull, started: bool) {
        if let (true, Pull::Done { pinned, digest, .. }) = (started, pull) {
            self.running = Some((pinned.clone(), digest.clone()));
        }
        let failed = matches!(pull, Pull::Failed { .. });
        self.retry = match (failed, self.retry) {
            (false, _) => None,
            (true, None) => Some((Instant::now() + FIRST_PULL_PAUSE, FIRST_PULL_PAUSE * 2)),
            (true, Some((_, pause))) => {
                Some((Instant::now() + pause, (pause * 2).min(MAX_PULL_PAUSE)))
            }
        };
    }

    /// Whether its failed pull is due again at `now`; if so, the try after this one
    /// is scheduled a pause later.
    pub(super) fn reschedule_if_due(&mut self, now: Instant) -> bool {
        match self.retry {
            Some((at, pause)) if at <= now => {
                self.retry = Some((now + pause, pause));
                true
            }
            _ => false,
        }
    }

    /// Its status from `pull` and its table `row`, when it differs from the last one
    /// seen or written (which it then becomes).
    pub(super) fn new_status(
        &mut self,
        pull: &Pull,
        row: Option<&PluginStatus>,
    ) -> Option<WasmPluginStatus> {
        let facts = Facts {
            generation: self.generation,
            paused: self.spec.paused,
            pull,
            running: self.running.as_ref(),
            row,
            refused: (self.refused.as_ref()).map(|(reason, why)| (*reason, why.as_str())),
        };
        // Whole seconds, as the API server keeps them, so a status read back equals it.
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let now = k8s_openapi::jiff::Timestamp::from_second(now).unwrap_or_default();
        let status = status_of(&facts, self.status.as_ref(), now);
        if self.status.as_ref() == Some(&status) {
            return None;
        }
        self.status = Some(status.clone());
        Some(status)
    }
}
