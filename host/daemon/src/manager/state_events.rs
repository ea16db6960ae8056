//! Kubernetes Events when a plugin's state turns bad — forbidden, degraded,
//! crash-looping, failed to load — and when it runs again, recorded by the host
//! (`reportingController: wasm-controller-manager`) about the plugin's `WasmPlugin`
//! when it comes from one, else about the host's own Pod, so `kubectl describe` and
//! `kubectl get events` show them as they show a Pod's. One Event per plugin and
//! reason a minute at most; repeats within the recorder's window are counted in its
//! series.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::status::{PluginStatus, PluginTable, State, WASMPLUGIN_ROW};
use wcm_core::contract::EventRecord;
use wcm_core::kube::events::{PluginRecorder, contract_ref};

/// The host's name in the Events it records about plugins.
pub const CONTROLLER: &str = "wasm-controller-manager";
/// The least time between two Events of one plugin for one reason.
const EVERY: Duration = Duration::from_secs(60);
/// events.k8s.io's bound on a note.
const NOTE_MAX: usize = 1024;

/// What Events about plugins are about.
#[derive(Debug, Clone, Default)]
pub struct EventTargets {
    /// The host's Pod (namespace, name, uid), from the downward API, if it runs in one.
    pub pod: Option<(String, String, Option<String>)>,
    /// The namespace of the `WasmPlugin`s this host follows, if it follows any.
    pub wasm_plugins: Option<String>,
}

/// Which plugins' states were seen, and when each reason last had an Event.
#[derive(Debug, Default)]
struct Seen {
    states: HashMap<String, State>,
    sent: HashMap<(String, &'static str), Instant>,
}

impl Seen {
    /// Notes `row`'s state now; the Event it calls for (warning, reason), if one is
    /// due.
    fn event_for(&mut self, row: &PluginStatus, now: Instant) -> Option<(bool, &'static str)> {
        let before = self.states.insert(row.file.clone(), row.state);
        let (warning, reason) = change(before, row.state)?;
        let key = (row.file.clone(), reason);
        if self
            .sent
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < EVERY)
        {
            return None;
        }
        self.sent.insert(key, now);
        Some((warning, reason))
    }
}

/// The Event a change of state from `before` to `now` calls for.
fn change(before: Option<State>, now: State) -> Option<(bool, &'static str)> {
    if before == Some(now) {
        return None;
    }
    match now {
        State::Forbidden => Some((true, "PluginForbidden")),
        State::Degraded => Some((true, "PluginDegraded")),
        State::CrashLooping => Some((true, "PluginCrashLooping")),
        State::Failed => Some((true, "PluginFailed")),
        State::Running if before.is_some_and(is_bad) => Some((false, "PluginRunning")),
        State::Running | State::Waiting => None,
    }
}

fn is_bad(state: State) -> bool {
    !matches!(state, State::Running | State::Waiting)
}

/// The task recording Events as the plugin table's rows change; it stops when this
/// is dropped.
pub struct StateEvents {
    task: JoinHandle<()>,
}

impl Drop for StateEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Records Events as the plugin table's rows change, until the result is dropped.
pub fn spawn(
    client: Client,
    instance: &str,
    targets: EventTargets,
    table: PluginTable,
) -> StateEvents {
    let recorder = PluginRecorder::new(client.clone(), CONTROLLER, instance);
    let events = Recording {
        recorder,
        client,
        targets,
    };
    let task = tokio::spawn(async move {
        let mut seen = Seen::default();
        loop {
            table.changed().await;
            for row in table.rows() {
                if let Some((warning, reason)) = seen.event_for(&row, Instant::now()) {
                    events.record(&row, warning, reason).await;
                }
            }
        }
    });
    StateEvents { task }
}

/// Where and how Events about plugins are recorded.
struct Recording {
    recorder: PluginRecorder,
    client: Client,
    targets: EventTargets,
}

impl Recording {
    async fn record(&self, row: &PluginStatus, warning: bool, reason: &'static str) {
        let plugin = row.identity();
        let Some(regarding) = self.regarding(&row.file).await else {
            tracing::debug!(
                plugin,
                reason,
                "no object to record the plugin's Event about"
            );
            return;
        };
        let why = row
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        let note = format!(
            "plugin {plugin} ({}) is {}{why}",
            row.file,
            row.state.name()
        );
        let event = EventRecord {
            regarding: contract_ref(&regarding),
            related: None,
            warning,
            reason: reason.to_string(),
            action: action_of(reason).to_string(),
            note: wcm_core::logs::escape_cut(&note, NOTE_MAX).0,
        };
        if let Err(e) = self.recorder.record(&regarding, None, &event).await {
            tracing::warn!(plugin, reason, error = %e, "cannot record the Event of a plugin's state");
        }
    }

    /// The `WasmPlugin` of a `wasmplugin/<name>` row, else the host's Pod.
    async fn regarding(&self, file: &str) -> Option<ObjectReference> {
        let Some(name) = file.strip_prefix(WASMPLUGIN_ROW) else {
            let (namespace, name, uid) = self.targets.pod.clone()?;
            return Some(object_reference("v1", "Pod", namespace, name, uid));
        };
        let namespace = self.targets.wasm_plugins.clone()?;
        let gvk = GroupVersionKind::gvk("wasm-controller-manager.io", "v1alpha1", "WasmPlugin");
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &ApiResource::from_gvk(&gvk),
        );
        let uid = api
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|p| p.metadata.uid);
        let version = "wasm-controller-manager.io/v1alpha1";
        Some(object_reference(
            version,
            "WasmPlugin",
            namespace,
            name.to_string(),
            uid,
        ))
    }
}

/// What the host was doing when the state changed, as an Event's action.
fn action_of(reason: &str) -> &'static str {
    match reason {
        "PluginForbidden" => "Review",
        "PluginDegraded" => "Watch",
        "PluginCrashLooping" => "Reconcile",
        _ => "Load",
    }
}

fn object_reference(
    api_version: &str,
    kind: &str,
    namespace: String,
    name: String,
    uid: Option<String>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        namespace: Some(namespace),
        name: Some(name),
        uid,
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: State) -> PluginStatus {
        let mut row = PluginStatus::failed("a.wasm", "broken");
        row.state = state;
        row
    }

    #[test]
    fn a_turn_for_the_worse_and_a_recovery_have_events_a_steady_state_none() {
        let mut seen = Seen::default();
        let t = Instant::now();
        assert_eq!(seen.event_for(&row(State::Waiting), t), None);
        assert_eq!(
            seen.event_for(&row(State::Running), t),
            None,
            "a first start"
        );
        let forbidden = Some((true, "PluginForbidden"));
        assert_eq!(seen.event_for(&row(State::Forbidden), t), forbidden);
        assert_eq!(seen.event_for(&row(State::Forbidden), t), None, "no change");
        assert_eq!(
            seen.event_for(&row(State::Running), t),
            Some((false, "PluginRunning"))
        );
    }

    #[test]
    fn a_plugin_flapping_gets_one_event_per_reason_a_minute() {
        let mut seen = Seen::default();
        let t = Instant::now();
        let looping = Some((true, "PluginCrashLooping"));
        assert_eq!(seen.event_for(&row(State::CrashLooping), t), looping);
        seen.event_for(&row(State::Running), t);
        let soon = t + Duration::from_secs(10);
        assert_eq!(seen.event_for(&row(State::CrashLooping), soon), None);
        seen.event_for(&row(State::Running), soon);
        let later = t + EVERY;
        assert_eq!(seen.event_for(&row(State::CrashLooping), later), looping);
    }
}
