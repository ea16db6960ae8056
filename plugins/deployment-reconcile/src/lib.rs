//! deployment-reconcile: keeps a Deployment in line with each `WebApp` custom resource
//! (`demo.wasm-controller-manager.io/v1alpha1`) and reports the Deployment's state in
//! the WebApp's status.
//!
//! The second classic controller shape, next to pod-counter: a custom resource says
//! what should exist; the controller applies the Deployment it implies (server-side
//! apply, so it owns exactly the fields it sets and reverts edits to those), owns it
//! through a controller reference (so the garbage collector deletes it with the
//! WebApp, and changes to it wake the WebApp's key), and writes status with a `Ready`
//! condition. An invalid spec gets a Warning Event and a condition, never a retry loop.

pub mod desired;
pub mod status;
pub mod webapp;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use wasm_controller_sdk::{
    Action, Controller, Error, EventType, Failure, ObjectRef, Registration, Request, Verb, Watch,
    cluster, export_controller,
};

use webapp::WebApp;

/// The controller.
pub struct DeploymentReconcile;

impl Controller for DeploymentReconcile {
    fn registration() -> Registration {
        let managed = format!("{}={}", desired::MANAGED_BY.0, desired::MANAGED_BY.1);
        Registration::new("deployment-reconcile", env!("CARGO_PKG_VERSION"))
            .watch(Watch::kind(webapp::kind()))
            .watch(
                Watch::all::<Deployment>()
                    .labels(&managed)
                    .owned_by_kind(webapp::kind()),
            )
            .permit::<Deployment>(&[Verb::Apply])
            .permit_kind(webapp::kind(), &[Verb::PatchStatus])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let target = ObjectRef {
            kind: webapp::kind(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
        };
        let app: WebApp = match cluster::get_json(&target) {
            Ok(json) => serde_json::from_value(json)?,
            Err(e) if e.is_not_found() => return Ok(Action::Done), // deleted: the GC has the rest
            Err(e) => return Err(e.into()),
        };
        if app.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let now = now()?;
        let problems = webapp::problems(&app.spec);
        let status = if problems.is_empty() {
            let applied = cluster::apply(&desired::deployment(&app)?, true)?;
            status::from_deployment(&app, &applied, now)
        } else {
            let status = status::invalid(&app, &problems, now);
            if app.status.as_ref() != Some(&status) {
                // Once per invalid spec: the status write wakes this key again.
                let note = format!("not applied: {}", problems.join("; "));
                cluster::record_event(&target, EventType::Warning, "InvalidSpec", &note)?;
            }
            status
        };
        if app.status.as_ref() != Some(&status) {
            cluster::patch_status(&target, &status)?;
        }
        Ok(Action::Done)
    }
}

/// The wall clock (WASI's), to whole seconds as Kubernetes times are written.
fn now() -> Result<Time, Error> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| Error::other(format!("clock before 1970: {e}")))?;
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let stamp = Timestamp::from_second(seconds).map_err(|e| Error::other(e.to_string()))?;
    Ok(Time(stamp))
}

export_controller!(DeploymentReconcile);
