//! A running plugin's health: `running`, `degraded` (a watch it needs does not work),
//! `crash-looping` (its reconciles trap or time out again and again) or `forbidden`
//! (RBAC no longer lets it read a kind it watches, or denies a rule it declared for
//! writing).
//!
//! A crash-looping plugin is slowed down as the kubelet slows a container in
//! CrashLoopBackOff: after [`CRASH_LOOP_AFTER`] traps or timeouts in a row, each
//! further reconcile waits 10 s, doubling up to 5 minutes. One success, or a new
//! version of the plugin, ends it.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use wcm_core::kube::informer::Informer;
use wcm_core::rights::Granted;
use wcm_core::rights::access::Rule;

/// Traps or timeouts in a row after which a plugin is crash-looping.
pub const CRASH_LOOP_AFTER: u32 = 5;
/// The first pause of a crash-looping plugin; it doubles with each further crash.
const FIRST_PAUSE: Duration = Duration::from_secs(10);
/// The longest pause.
const LONGEST_PAUSE: Duration = Duration::from_secs(300);

/// What a plugin's health is now, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Everything works.
    Running,
    /// A watch it needs fails; the API server's error.
    Degraded(String),
    /// Its reconciles keep trapping or timing out; the last failure.
    CrashLooping(String),
    /// RBAC no longer lets it read a kind it watches; the rules it lacks.
    Forbidden(String),
}

impl Health {
    /// The state's name, as the table and the metric show it.
    pub fn name(&self) -> &'static str {
        match self {
            Health::Running => "running",
            Health::Degraded(_) => "degraded",
            Health::CrashLooping(_) => "crash-looping",
            Health::Forbidden(_) => "forbidden",
        }
    }
}

#[derive(Debug, Default)]
struct Crashes {
    in_a_row: u32,
    last: Option<String>,
    /// Pauses imposed so far in this loop; each doubles the next.
    pauses: u32,
    /// No reconcile starts before this, while crash-looping.
    not_before: Option<Instant>,
}

/// The crash count of one plugin, shared by its workers.
#[derive(Debug)]
pub struct CrashLoop {
    crashes: Mutex<Crashes>,
    /// `wcm_plugin_consecutive_failures` of the plugin.
    gauge: Gauge,
}

impl CrashLoop {
    /// A plugin that has not crashed, reporting to `gauge`.
    pub fn new(gauge: Gauge) -> CrashLoop {
        gauge.set(0);
        CrashLoop {
            crashes: Mutex::new(Crashes::default()),
            gauge,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Crashes> {
        self.crashes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a trap or timeout; returns the pause before the next reconcile if
    /// the plugin is crash-looping now. Crashes of reconciles that were already
    /// running when a pause began (several workers fail at once) do not lengthen it.
    pub fn crashed(&self, error: &str) -> Option<Duration> {
        let mut c = self.lock();
        c.in_a_row = c.in_a_row.saturating_add(1);
        c.last = Some(error.to_string());
        self.gauge.set(i64::from(c.in_a_row));
        if c.in_a_row < CRASH_LOOP_AFTER {
            return None;
        }
        let now = Instant::now();
        if let Some(until) = c.not_before.filter(|until| *until > now) {
            return Some(until - now);
        }
        let pause = FIRST_PAUSE
            .saturating_mul(2u32.saturating_pow(c.pauses.min(16)))
            .min(LONGEST_PAUSE);
        c.pauses = c.pauses.saturating_add(1);
        c.not_before = Some(now + pause);
        Some(pause)
    }

    /// Records a successful reconcile: the loop, if any, is over.
    pub fn succeeded(&self) {
        let mut c = self.lock();
        if c.in_a_row > 0 {
            *c = Crashes::default();
            self.gauge.set(0);
        }
    }

    /// Waits out the pause of a crash-looping plugin (at once otherwise).
    pub async fn wait_turn(&self) {
        let until = self.lock().not_before;
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    /// The last failure, while crash-looping.
    pub fn looping(&self) -> Option<String> {
        let c = self.lock();
        (c.in_a_row >= CRASH_LOOP_AFTER).then(|| {
            format!(
                "{} reconciles in a row trapped or timed out; last: {}",
                c.in_a_row,
                c.last.as_deref().unwrap_or("-")
            )
        })
    }
}

/// The health of a plugin with these `informers`, crash count and rights. What RBAC
/// denies comes first — a read it needs (it is not served that kind), then a rule it
/// declared for writing (those writes are refused) — then a watch that does not work:
/// the plugin cannot do anything right without either.
pub fn health_of(
    informers: &[std::sync::Arc<Informer>],
    crashes: &CrashLoop,
    granted: &Granted,
) -> Health {
    let closed = granted.closed_rules();
    if !closed.is_empty() {
        let why = format!(
            "forbidden: its ServiceAccount is no longer granted: {} (it is not served that \
             kind until RBAC grants it)",
            listed(&closed)
        );
        return Health::Forbidden(why);
    }
    if granted.host_cannot_impersonate() {
        let why = "forbidden: the host may not impersonate its ServiceAccount (the host's \
                   rights for this plugin are part of the plugin's RBAC: `wasm-controller-manager \
                   rbac` prints them); its writes and Events fail until RBAC grants it"
            .to_string();
        return Health::Forbidden(why);
    }
    let denied = granted.denied_rules();
    if !denied.is_empty() {
        let why = format!(
            "forbidden: its ServiceAccount is not granted: {} (the API server refuses the \
             writes that need it until RBAC grants it)",
            listed(&denied)
        );
        return Health::Forbidden(why);
    }
    let problems: Vec<String> = informers.iter().filter_map(|i| i.problem()).collect();
    if !problems.is_empty() {
        return Health::Degraded(problems.join("; "));
    }
    match crashes.looping() {
        Some(why) => Health::CrashLooping(why),
        None => Health::Running,
    }
}

fn listed(rules: &[Rule]) -> String {
    let rules: Vec<String> = rules.iter().map(ToString::to_string).collect();
    rules.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn five_crashes_in_a_row_start_a_growing_pause_that_a_success_ends() {
        let gauge = Gauge::default();
        let crashes = CrashLoop::new(gauge.clone());
        for _ in 1..CRASH_LOOP_AFTER {
            assert_eq!(crashes.crashed("trapped: unreachable"), None);
        }
        assert_eq!(crashes.looping(), None);
        assert_eq!(crashes.crashed("timed out after 2s"), Some(FIRST_PAUSE));
        // Another worker's reconcile, running when the pause began, fails too.
        assert_eq!(crashes.crashed("timed out after 2s"), Some(FIRST_PAUSE));
        let why = crashes.looping().expect("crash-looping");
        assert!(why.starts_with("6 reconciles in a row"), "{why}");
        assert!(why.ends_with("last: timed out after 2s"), "{why}");
        assert_eq!(gauge.get(), 6);
        let started = Instant::now();
        crashes.wait_turn().await;
        assert_eq!(started.elapsed(), FIRST_PAUSE);
        assert_eq!(
            crashes.crashed("again"),
            Some(FIRST_PAUSE * 2),
            "the next round doubles"
        );
        for _ in 0..20 {
            crashes.wait_turn().await;
            crashes.crashed("again");
        }
        crashes.wait_turn().await;
        assert_eq!(crashes.crashed("again"), Some(LONGEST_PAUSE));
        crashes.succeeded();
        assert_eq!(crashes.looping(), None);
        assert_eq!(gauge.get(), 0);
        let started = Instant::now();
        crashes.wait_turn().await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
