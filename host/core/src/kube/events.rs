//! Event recording for plugins (events.k8s.io/v1): a new Event, or a repeat folded into
//! the Event's series.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::time::Instant;

use super::discovery::split_api_version;
use super::event_series::{EventKey, SeriesCache};
use crate::contract::{EventRecord, Gvk, ObjectRef};

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
/// `reportingInstance` this host. Repeats of the same (object, type, reason, action)
/// within a few minutes are folded into one Event with a growing series count, as
/// client-go's recorder does.
#[derive(Clone)]
pub struct PluginRecorder {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<SeriesCache>>,
}

impl std::fmt::Debug for PluginRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginRecorder")
    }
}

impl PluginRecorder {
    /// A recorder for `plugin` running on host `instance`.
    pub fn new(client: Client, plugin: &str, instance: &str) -> PluginRecorder {
        PluginRecorder {
            client,
            controller: plugin.to_string(),
            instance: instance.to_string(),
            series: Arc::default(),
        }
    }

    /// Checks a reason and a note before anything is sent.
    pub fn check(reason: &str, action: &str, note: &str) -> Result<(), EventError> {
        if reason.is_empty() || reason.len() > REASON_MAX {
            return Err(EventError::Reason(reason.len()));
        }
        let bad = |c: char| c.is_control() || c.is_whitespace();
        if action.len() > REASON_MAX || action.contains(bad) {
            return Err(EventError::Action(crate::logs::shorten(action)));
        }
        if note.len() > NOTE_MAX {
            return Err(EventError::Note(note.len()));
        }
        Ok(())
    }

    /// Publishes one Event about `regarding`, `related` as its second object: extends
    /// the series of the same Event seen within the window, else creates one (also
    /// when the API server no longer has the Event the series was of).
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        e: &EventRecord,
    ) -> Result<(), EventError> {
        PluginRecorder::check(&e.reason, &e.action, &e.note)?;
        let action = match e.action.is_empty() {
            true => ACTION,
            false => e.action.as_str(),
        };
        let key = EventKey {
            warning: e.warning,
            action: action.to_string(),
            reason: e.reason.clone(),
            regarding: regarding.into(),
            related: related.as_ref().map(Into::into),
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let now = Instant::now();
        let repeat = self.cache().repeat_of(&key, now);
        if let Some((name, count)) = repeat {
            match extend_series(&api, &name, count).await {
                Ok(()) => {
                    self.cache().published(key, name, count, now);
                    return Ok(());
                }
                Err(kube::Error::Api(gone)) if gone.code == 404 => self.cache().forget(&key),
                Err(other) => return Err(other.into()),
            }
        }
        let event = self.new_event(regarding, related, e, action, namespace);
        let created = api.create(&PostParams::default(), &event).await?;
        let name = created.metadata.name.unwrap_or_default();
        self.cache().published(key, name, 1, now);
        Ok(())
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, SeriesCache> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new Event, named after its object and the time, as kube-runtime names them.
    fn new_event(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        e: &EventRecord,
        action: &str,
        namespace: &str,
    ) -> Event {
        let now = Timestamp::now();
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if e.warning { "Warning" } else { "Normal" }.to_string()),
            reason: Some(e.reason.clone()),
            action: Some(action.to_string()),
            note: (!e.note.is_empty()).then(|| e.note.clone()),
            regarding: Some(regarding.clone()),
            related,
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

/// Extends the series of Event `name` to `count` observations, the last one now: a
/// merge patch of the series alone, as client-go sends it.
async fn extend_series(api: &Api<Event>, name: &str, count: i32) -> Result<(), kube::Error> {
    let series = EventSeries {
        count,
        last_observed_time: MicroTime(Timestamp::now()),
    };
    let patch = serde_json::json!({ "series": series });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The contract's reference to the same object (the recorder reads the Event's
/// reason, action and note from the record, its object from the reference).
pub fn contract_ref(object: &ObjectReference) -> ObjectRef {
    let (group, version) = split_api_version(object.api_version.as_deref().unwrap_or_default());
    ObjectRef {
        kind: Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: object.kind.clone().unwrap_or_default(),
        },
        namespace: object.namespace.clone(),
        name: object.name.clone().unwrap_or_default(),
    }
}
