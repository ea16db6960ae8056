//! Warning Events about the objects an informer cannot decode, recorded by the host
//! (`reportingController: wasm-controller-manager`, reason `Undecodable`) on the object
//! itself, so `kubectl describe` shows why the host's plugins do not see it as it is.
//!
//! Recorded from a task of their own through a bounded channel: an informer never
//! waits for the API server, and a flood of undecodable objects costs at most the
//! channel's length (the rest are dropped; the log line and the metric still count
//! them). The host's Role must let it create Events where the object is; where it may
//! not, the log says so once.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::core::GroupVersionKind;
use tokio::sync::mpsc;

use crate::contract::EventRecord;
use crate::kube::events::{PluginRecorder, contract_ref};

/// Reports waiting to be recorded at most; past it they are dropped.
const QUEUED: usize = 64;
/// The host's name in the Events it records.
const CONTROLLER: &str = "wasm-controller-manager";
/// events.k8s.io's bound on a note.
const NOTE_MAX: usize = 1024;

/// One object to report.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub gvk: GroupVersionKind,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
    pub cause: String,
}

/// Where informers send their reports.
#[derive(Debug, Clone)]
pub struct Reporter {
    sender: mpsc::Sender<Report>,
}

impl Reporter {
    /// Starts recording reports as the host `instance`, with `client`.
    pub fn start(client: Client, instance: &str) -> Reporter {
        let (sender, receiver) = mpsc::channel(QUEUED);
        let recorder = PluginRecorder::new(client, CONTROLLER, instance);
        tokio::spawn(record_all(recorder, receiver));
        Reporter { sender }
    }

    /// Queues `report`, or drops it when the queue is full.
    pub(crate) fn report(&self, report: Report) {
        let _ = self.sender.try_send(report);
    }
}

async fn record_all(recorder: PluginRecorder, mut reports: mpsc::Receiver<Report>) {
    let mut said = false;
    while let Some(report) = reports.recv().await {
        let regarding = ObjectReference {
            api_version: Some(report.gvk.api_version()),
            kind: Some(report.gvk.kind),
            namespace: report.namespace,
            name: Some(report.name),
            uid: report.uid,
            ..ObjectReference::default()
        };
        let note = format!(
            "the host cannot decode this object ({}); the plugins watching its kind see its \
             last decodable version, or none",
            report.cause
        );
        let event = EventRecord {
            regarding: contract_ref(&regarding),
            related: None,
            warning: true,
            reason: "Undecodable".into(),
            action: "Decode".into(),
            note: crate::logs::escape_cut(&note, NOTE_MAX).0,
        };
        if let Err(e) = recorder.record(&regarding, None, &event).await
            && !std::mem::replace(&mut said, true)
        {
            tracing::warn!(error = %e, "cannot record an Event about an object the host cannot \
                decode (the host's RBAC lets it create Events there?); the log and \
                wcm_informer_undecodable_objects name such objects");
        }
    }
}
