//! Event recording for plugins (events.k8s.io/v1), through kube-runtime's `Recorder`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::contract::EventRecord;

/// `action` of an Event whose plugin named none (every Event of a 0.2 plugin): the
/// plugin acted while reconciling.
const ACTION: &str = "Reconcile";
/// events.k8s.io limits: reason and action at most 128 characters, note at most 1 KiB.
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

/// An Event the API server would reject.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The reason is empty or too long.
    #[error("event reason must be 1 to 128 characters, got {0}")]
    Reason(usize),
    /// The action is too long or not one word.
    #[error(
        "event action must be at most 128 characters without spaces or control characters, got {0:?}"
    )]
    Action(String),
    /// The note is over 1 KiB.
    #[error("event note must be at most 1024 bytes, got {0}")]
    Note(usize),
    /// The API server refused or could not be reached.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Records Events as one plugin: `reportingController` is the plugin's name and
/// `reportingInstance` this host. Repeats of the same (object, type, reason) within
/// a few minutes are folded into one Event with a growing series count.
#[derive(Clone)]
pub struct PluginRecorder {
    recorder: Recorder,
}

impl std::fmt::Debug for PluginRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginRecorder")
    }
}

impl PluginRecorder {
    /// A recorder for `plugin` running on host `instance`.
    pub fn new(client: Client, plugin: &str, instance: &str) -> PluginRecorder {
        let reporter = Reporter {
            controller: plugin.to_string(),
            instance: Some(instance.to_string()),
        };
        PluginRecorder {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Checks a reason and a note before anything is sent.
    pub fn check(reason: &str, action: &str, note: &str) -> Result<(), EventError> {
        if reason.is_empty() || reason.len() > REASON_MAX {
            return Err(EventError::Reason(reason.len()));
        }
        let bad = |c: char| c.is_control() || c.is_whitespace();
        if action.len() > REASON_MAX || action.contains(bad) {
            return Err(EventError::Action(crate::kube::names::shorten(action)));
        }
        if note.len() > NOTE_MAX {
            return Err(EventError::Note(note.len()));
        }
        Ok(())
    }

    /// Publishes one Event about `regarding`, `related` as its second object.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        e: &EventRecord,
    ) -> Result<(), EventError> {
        PluginRecorder::check(&e.reason, &e.action, &e.note)?;
        let event = Event {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.clone(),
            note: (!e.note.is_empty()).then(|| e.note.clone()),
            action: match e.action.is_empty() {
                true => ACTION.to_string(),
                false => e.action.clone(),
            },
            secondary: related,
        };
        self.recorder.publish(&event, regarding).await?;
        Ok(())
    }
}
