//! A `WasmPlugin`'s status as a projection of what the host knows of it: the pull (its
//! pinned reference and digest, or why it failed) and the plugin table's row (state,
//! contract, rights, reason), with the conditions `Pulled`, `Loaded` and `Ready`.
//! Pure: the manager writes the result; a condition keeps its transition time while
//! its status stays.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::{RuleCounts, WasmPluginStatus};
use crate::status::{PluginStatus, State};

/// The last pull of a `WasmPlugin`.
#[derive(Debug, Clone, PartialEq)]
pub enum Pull {
    /// Not tried yet (or paused).
    None,
    /// Fetched: the pinned reference and its digest, and whether from the disk.
    Done {
        /// `image@sha256:...`.
        pinned: String,
        /// The manifest digest.
        digest: String,
        /// Taken from the disk store.
        cached: bool,
    },
    /// Failed: the condition's reason and message.
    Failed {
        /// Why, in one word.
        reason: &'static str,
        /// The error.
        message: String,
    },
}

/// The pulls load tasks report, by resource name, for the manager to read.
pub type Pulls = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Pull>>>;

/// What the status is made from.
#[derive(Debug)]
pub struct Facts<'a> {
    /// The spec's generation these facts are about.
    pub generation: Option<i64>,
    /// Whether the spec says to pause.
    pub paused: bool,
    /// The last pull.
    pub pull: &'a Pull,
    /// The pinned reference and digest of the version running, if one runs.
    pub running: Option<&'a (String, String)>,
    /// The plugin table's row, if the plugin got that far.
    pub row: Option<&'a PluginStatus>,
    /// Why the host refuses the resource itself (it cannot be decoded, its name is
    /// no plugin's): the `Ready` condition's reason and message.
    pub refused: Option<(&'static str, &'a str)>,
}

/// The status `facts` make, keeping the transition times of `previous`'s conditions
/// whose status did not change.
pub fn status_of(
    facts: &Facts,
    previous: Option<&WasmPluginStatus>,
    now: Timestamp,
) -> WasmPluginStatus {
    let (pinned, digest) = match facts.running {
        Some((pinned, digest)) => (Some(pinned.clone()), Some(digest.clone())),
        None => (None, None),
    };
    let row = facts.row;
    let state = match (facts.refused, facts.paused, row) {
        (Some(_), _, _) => Some(State::Failed.name().to_string()),
        (None, true, _) => Some("paused".to_string()),
        (None, false, Some(row)) => Some(row.state.name().to_string()),
        (None, false, None) => None,
    };
    let conditions = match facts.refused {
        Some((reason, message)) => refused(reason, message),
        None => [pulled(facts), loaded(facts), ready(facts)],
    };
    let old = previous.map_or(&[][..], |p| &p.conditions[..]);
    let conditions = conditions
        .into_iter()
        .map(|(kind, status, reason, message)| {
            condition(kind, status, reason, message, facts.generation, old, now)
        })
        .collect();
    WasmPluginStatus {
        observed_generation: facts.generation,
        image: pinned,
        digest,
        contract: row.and_then(|r| r.contract.clone()),
        state,
        rules: (row.and_then(|r| r.rights.as_ref())).map(|r| RuleCounts {
            declared: counted(r.declared),
            granted: counted(r.granted),
        }),
        conditions,
    }
}

/// The merge patch that makes a `WasmPlugin`'s status `status` whole: each field it
/// leaves out written as `null`, so nothing another writer put there (a count that
/// does not decode) outlives the host's next write.
pub fn status_patch(status: &WasmPluginStatus) -> serde_json::Value {
    const FIELDS: [&str; 7] = [
        "observedGeneration",
        "image",
        "digest",
        "contract",
        "state",
        "rules",
        "conditions",
    ];
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        for field in FIELDS {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
    }
    serde_json::json!({ "status": value })
}

type Verdict = (&'static str, &'static str, String, String);

/// A count of rules as status holds it: at most the schema's maximum.
fn counted(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX).min(super::MAX_RULES)
}

/// The conditions of a resource the host refuses before any pull.
fn refused(reason: &str, message: &str) -> [Verdict; 3] {
    [
        (
            "Pulled",
            "Unknown",
            reason.into(),
            "not pulled: the resource is refused".into(),
        ),
        (
            "Loaded",
            "Unknown",
            "NotPulled".into(),
            "not pulled: the resource is refused".into(),
        ),
        ("Ready", "False", reason.into(), message.into()),
    ]
}

fn pulled(facts: &Facts) -> Verdict {
    match facts.pull {
        Pull::Done {
            pinned,
            cached: true,
            ..
        } => (
            "Pulled",
            "True",
            "Cached".into(),
            format!("{pinned} from the disk store"),
        ),
        Pull::Done { pinned, .. } => (
            "Pulled",
            "True",
            "Pulled".into(),
            format!("pulled {pinned}"),
        ),
        Pull::Failed { reason, message } => {
            ("Pulled", "False", reason.to_string(), message.clone())
        }
        Pull::None if facts.paused => ("Pulled", "Unknown", "Paused".into(), "spec.paused".into()),
        Pull::None => (
            "Pulled",
            "Unknown",
            "Pulling".into(),
            "not pulled yet".into(),
        ),
    }
}

fn loaded(facts: &Facts) -> Verdict {
    let Some(row) = facts.row else {
        return (
            "Loaded",
            "Unknown",
            "NotPulled".into(),
            "waiting for the pull".into(),
        );
    };
    let reason = row.reason.clone().unwrap_or_default();
    match (row.state, &row.version) {
        // Nothing was pulled, so nothing was loaded.
        (State::Failed, _) if matches!(facts.pull, Pull::Failed { .. }) => {
            ("Loaded", "Unknown", "NotPulled".into(), reason)
        }
        (State::Failed, _) => ("Loaded", "False", "LoadFailed".into(), reason),
        (_, Some(version)) => {
            let plugin = row.plugin.clone().unwrap_or_default();
            let contract = row.contract.clone().unwrap_or_default();
            let running = format!("{plugin} {version} ({contract})");
            match reason.starts_with("upgrade refused") {
                // The spec's version was refused; the older one runs on.
                true => {
                    let message = format!("{reason}; {running} runs on");
                    ("Loaded", "False", "UpgradeRefused".into(), message)
                }
                false => ("Loaded", "True", "Loaded".into(), running),
            }
        }
        (_, None) => ("Loaded", "True", "Registered".into(), reason),
    }
}

fn ready(facts: &Facts) -> Verdict {
    if facts.paused {
        return (
            "Ready",
            "False",
            "Paused".into(),
            "spec.paused: not running".into(),
        );
    }
    let Some(row) = facts.row else {
        let why = match facts.pull {
            Pull::Failed { message, .. } => message.clone(),
            _ => "not loaded yet".into(),
        };
        return ("Ready", "False", "NotLoaded".into(), why);
    };
    let reason = row.reason.clone().unwrap_or_default();
    match row.state {
        State::Running => ("Ready", "True", "Running".into(), "reconciling".into()),
        State::Degraded => ("Ready", "False", "Degraded".into(), reason),
        State::CrashLooping => ("Ready", "False", "CrashLooping".into(), reason),
        State::Failed => ("Ready", "False", "Failed".into(), reason),
        State::Waiting => ("Ready", "False", "Waiting".into(), reason),
        State::Forbidden => ("Ready", "False", "Forbidden".into(), reason),
    }
}

fn condition(
    kind: &str,
    status: &str,
    reason: String,
    message: String,
    generation: Option<i64>,
    old: &[Condition],
    now: Timestamp,
) -> Condition {
    let since = (old.iter())
        .find(|c| c.type_ == kind && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.to_string(),
        status: status.to_string(),
        reason,
        message: capped(message),
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// Longest condition message kept, in bytes: a whole error an operator can act on,
/// never a plugin's megabyte.
const MAX_MESSAGE_BYTES: usize = 2048;

fn capped(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: State, reason: Option<&str>) -> PluginStatus {
        let mut row = PluginStatus::running("wasmplugin/pc", "pc", "1.0.0", "abc");
        row.state = state;
        row.reason = reason.map(str::to_string);
        row.contract = Some("wcm:controller@0.3.1".into());
        row
    }

    fn find<'a>(status: &'a WasmPluginStatus, kind: &str) -> &'a Condition {
        (status.conditions.iter().find(|c| c.type_ == kind)).expect("condition")
    }

    const PIN: &str = "r.example/pc:v1@sha256:aa";

    /// Facts of generation `generation`, not paused.
    fn facts<'a>(
        generation: i64,
        pull: &'a Pull,
        running: Option<&'a (String, String)>,
        row: Option<&'a PluginStatus>,
    ) -> Facts<'a> {
        Facts {
            generation: Some(generation),
            paused: false,
            pull,
            running,
            row,
            refused: None,
        }
    }

    #[test]
    fn a_running_plugin_is_pulled_loaded_and_ready_with_its_digest() {
        let pull = Pull::Done {
            pinned: PIN.into(),
            digest: "sha256:aa".into(),
            cached: false,
        };
        let running = row(State::Running, None);
        let pin = (PIN.to_string(), "sha256:aa".to_string());
        let facts = facts(2, &pull, Some(&pin), Some(&running));
        let status = status_of(&facts, None, Timestamp::UNIX_EPOCH);
        assert_eq!(status.digest.as_deref(), Some("sha256:aa"));
        assert_eq!(status.image.as_deref(), Some(PIN));
        assert_eq!(status.state.as_deref(), Some("running"));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(find(&status, "Pulled").status, "True");
        assert_eq!(
            find(&status, "Loaded").message,
            "pc 1.0.0 (wcm:controller@0.3.1)"
        );
        assert_eq!(find(&status, "Ready").status, "True");
    }

    #[test]
    fn a_failed_pull_keeps_the_running_digest_and_says_why() {
        let pin = (PIN.to_string(), "sha256:aa".to_string());
        let before = status_of(
            &Facts {
                generation: Some(1),
                paused: false,
                pull: &Pull::Done {
                    pinned: PIN.into(),
                    digest: "sha256:aa".into(),
                    cached: true,
                },
                running: Some(&pin),
                row: Some(&row(State::Running, None)),
                refused: None,
            },
            None,
            Timestamp::UNIX_EPOCH,
        );
        let pull = Pull::Failed {
            reason: "RegistryUnreachable",
            message: "r.example/pc:v2: the registry cannot be reached".into(),
        };
        let running = row(State::Running, None);
        let facts = facts(2, &pull, Some(&pin), Some(&running));
        let later = Timestamp::from_second(60).expect("time");
        let status = status_of(&facts, Some(&before), later);
        assert_eq!(
            status.digest.as_deref(),
            Some("sha256:aa"),
            "the running version stays"
        );
        let pulled = find(&status, "Pulled");
        assert_eq!(
            (pulled.status.as_str(), pulled.reason.as_str()),
            ("False", "RegistryUnreachable")
        );
        assert_eq!(pulled.last_transition_time.0, later);
        // Ready did not change: its transition time stays.
        assert_eq!(
            find(&status, "Ready").last_transition_time.0,
            Timestamp::UNIX_EPOCH
        );
    }

    #[test]
    fn a_refused_upgrade_is_not_loaded_while_the_older_version_runs_on() {
        let pull = Pull::Done {
            pinned: PIN.into(),
            digest: "sha256:bb".into(),
            cached: false,
        };
        let pin = (PIN.to_string(), "sha256:aa".to_string());
        let refused = row(
            State::Running,
            Some("upgrade refused: register() failed: 17 watches"),
        );
        let facts = facts(3, &pull, Some(&pin), Some(&refused));
        let status = status_of(&facts, None, Timestamp::UNIX_EPOCH);
        let loaded = find(&status, "Loaded");
        assert_eq!(
            (loaded.status.as_str(), loaded.reason.as_str()),
            ("False", "UpgradeRefused")
        );
        assert_eq!(
            loaded.message,
            "upgrade refused: register() failed: 17 watches; pc 1.0.0 (wcm:controller@0.3.1) runs on"
        );
        assert_eq!(find(&status, "Ready").status, "True");
        assert_eq!(status.digest.as_deref(), Some("sha256:aa"));
    }

    #[test]
    fn a_paused_or_refused_plugin_is_not_ready_and_says_why() {
        let none = Pull::None;
        let paused = Facts {
            generation: Some(3),
            paused: true,
            pull: &none,
            running: None,
            row: None,
            refused: None,
        };
        let status = status_of(&paused, None, Timestamp::UNIX_EPOCH);
        assert_eq!(status.state.as_deref(), Some("paused"));
        assert_eq!(find(&status, "Ready").reason, "Paused");
        let failed = row(
            State::Failed,
            Some("register() failed: trapped: unreachable"),
        );
        let pull = Pull::Done {
            pinned: PIN.into(),
            digest: "sha256:aa".into(),
            cached: false,
        };
        let facts = facts(4, &pull, None, Some(&failed));
        let status = status_of(&facts, None, Timestamp::UNIX_EPOCH);
        let loaded = find(&status, "Loaded");
        assert_eq!(
            (loaded.status.as_str(), loaded.reason.as_str()),
            ("False", "LoadFailed")
        );
        assert_eq!(loaded.message, "register() failed: trapped: unreachable");
    }

    #[test]
    fn a_refused_resource_is_failed_and_says_why_on_ready() {
        let none = Pull::None;
        let facts = Facts {
            generation: Some(5),
            paused: false,
            pull: &none,
            running: None,
            row: None,
            refused: Some((
                "Undecodable",
                "the host cannot read it: recursion limit exceeded",
            )),
        };
        let status = status_of(&facts, None, Timestamp::UNIX_EPOCH);
        assert_eq!(status.state.as_deref(), Some("failed"));
        let ready = find(&status, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "Undecodable")
        );
        assert!(
            ready.message.contains("recursion limit"),
            "{}",
            ready.message
        );
        assert_eq!(status.rules, None);
    }

    #[test]
    fn a_status_patch_clears_every_field_it_does_not_set() {
        let status = WasmPluginStatus {
            state: Some("failed".into()),
            ..WasmPluginStatus::default()
        };
        let patch = status_patch(&status);
        assert_eq!(patch["status"]["state"], "failed");
        assert_eq!(patch["status"]["rules"], serde_json::Value::Null);
        assert!(
            patch["status"]
                .as_object()
                .expect("an object")
                .contains_key("rules")
        );
        assert_eq!(patch["status"].as_object().map(|o| o.len()), Some(7));
    }
}
