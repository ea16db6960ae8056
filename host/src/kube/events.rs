//! Event recording for plugins (events.k8s.io/v1), through kube-runtime's `Recorder`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// `action` of every Event a plugin records: the plugin acted while reconciling.
const ACTION: &str = "Reconcile";
/// events.k8s.io limits: reason at most 128 characters, note at most 1 KiB.
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

/// An Event the API server would reject.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The reason is empty or too long.
    #[error("event reason must be 1 to 128 characters, got {0}")]
    Reason(usize),
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
    pub fn check(reason: &str, note: &str) -> Result<(), EventError> {
        if reason.is_empty() || reason.len() > REASON_MAX {
            return Err(EventError::Reason(reason.len()));
        }
        if note.len() > NOTE_MAX {
            return Err(EventError::Note(note.len()));
        }
        Ok(())
    }

    /// Publishes one Event about `regarding`.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
    ) -> Result<(), EventError> {
        PluginRecorder::check(reason, note)?;
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: (!note.is_empty()).then(|| note.to_string()),
            action: ACTION.to_string(),
            secondary: None,
        };
        self.recorder.publish(&event, regarding).await?;
        Ok(())
    }
}
