//! deployment-reconcile: keeps a Deployment in line with each `WebApp` custom resource
//! (`demo.wasm-controller-manager.io/v1alpha1`), backs it with the Secret the WebApp
//! names, keeps an external record of it, and reports the Deployment's state in the
//! WebApp's status.
//!
//! The second classic controller shape, next to pod-counter: a custom resource says
//! what should exist; the controller applies the Deployment it implies (server-side
//! apply, so it owns exactly the fields it sets and reverts edits to those), owns it
//! through a controller reference (so the garbage collector deletes it with the
//! WebApp, and changes to it wake the WebApp's key), and writes status with a `Ready`
//! condition. An invalid spec gets a Warning Event and a condition, never a retry loop.
//!
//! With contract 0.3 it also: reads the WebApp's Secret live (a kind it does not watch,
//! so the host caches no Secrets) and stamps its resourceVersion on the Pod template,
//! so a rotated Secret rolls the Pods; keeps a record of each WebApp in the namespace
//! its operator's settings name, with a finalizer that deletes the record before the
//! WebApp goes; is woken only by spec changes and deletions of WebApps (its own status
//! writes do not wake it) and holds only the metadata of the Deployments it owns; and
//! counts its outcomes in its own metric.

pub mod desired;
pub mod registry;
pub mod status;
pub mod webapp;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use wasm_controller_sdk::finalizer::{Finalized, finalize};
use wasm_controller_sdk::{
    Action, Controller, Error, EventType, Failure, ObjectRef, Predicate, Registration, Request,
    Verb, Watch, cluster, config, export_controller, metrics,
};

use registry::Settings;
use webapp::WebApp;

/// The controller.
pub struct DeploymentReconcile;

impl Controller for DeploymentReconcile {
    fn registration() -> Registration {
        let managed = format!("{}={}", desired::MANAGED_BY.0, desired::MANAGED_BY.1);
        // An operator may run copies under other names (settings `name: ...`).
        let name = config::name_or("deployment-reconcile");
        Registration::new(&name, env!("CARGO_PKG_VERSION"))
            .watch(
                Watch::kind(webapp::kind())
                    .when(Predicate::GenerationChanged)
                    .when(Predicate::DeletionStarted),
            )
            .watch(
                Watch::all::<Deployment>()
                    .labels(&managed)
                    .metadata_only()
                    .owned_by_kind(webapp::kind()),
            )
            .permit::<Deployment>(&[Verb::Apply])
            .permit::<Secret>(&[Verb::Get])
            .permit::<ConfigMap>(&[Verb::Apply, Verb::Delete])
            .permit_kind(webapp::kind(), &[Verb::PatchStatus, Verb::Patch])
            .counter("reconciles", "WebApp reconciles by outcome", &["outcome"])
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
        let settings = config::settings::<Settings>()
            .map_err(Error::terminal)?
            .unwrap_or_default();
        if !keep_registered(&target, &app, &settings)? {
            metrics::inc("reconciles", &["finalized"])?;
            return Ok(Action::Done);
        }
        let (outcome, action) = reconcile_live(&target, &app, &settings)?;
        metrics::inc("reconciles", &[outcome])?;
        Ok(action)
    }
}

/// Keeps the finalizer on a living WebApp, or deletes its record and lets a deleted
/// one go; false once it is being deleted. Without a registry there is neither.
fn keep_registered(target: &ObjectRef, app: &WebApp, settings: &Settings) -> Result<bool, Error> {
    let Some(registry) = settings.registry_namespace.as_deref() else {
        return Ok(app.metadata.deletion_timestamp.is_none());
    };
    let state = finalize(target, &app.metadata, registry::FINALIZER, || {
        registry::forget(app, registry)
    })?;
    Ok(state == Finalized::Active)
}

/// Applies a living WebApp (or says why not) and writes its status; returns the
/// outcome for the metric and what the host should do next.
fn reconcile_live(
    target: &ObjectRef,
    app: &WebApp,
    settings: &Settings,
) -> Result<(&'static str, Action), Failure> {
    let now = now()?;
    let problems = webapp::problems(&app.spec);
    if !problems.is_empty() {
        let note = format!("not applied: {}", problems.join("; "));
        let status = status::invalid(app, &problems, now);
        write_status(target, app, &status, "InvalidSpec", &note)?;
        return Ok(("invalid", Action::Done));
    }
    let secret_version = match app.spec.secret_name.as_deref() {
        None => None,
        Some(name) => match secret_version(app, name)? {
            Some(version) => Some(version),
            None => {
                let status = status::secret_missing(app, name, now);
                let note = format!("not applied: the Secret {name} does not exist");
                write_status(target, app, &status, "SecretMissing", &note)?;
                return Ok(("secret_missing", requeue_after(settings.secret_recheck())));
            }
        },
    };
    let applied = cluster::apply(&desired::deployment(app, secret_version.as_deref())?, true)?;
    if let Some(registry) = settings.registry_namespace.as_deref() {
        registry::keep(app, registry)?;
    }
    let status = status::from_deployment(app, &applied, now);
    if app.status.as_ref() != Some(&status) {
        cluster::patch_status(target, &status)?;
    }
    let action = match secret_version {
        Some(_) => requeue_after(settings.secret_recheck()),
        None => Action::Done,
    };
    Ok(("applied", action))
}

/// The resourceVersion of the WebApp's Secret, read live; none if it does not exist.
fn secret_version(app: &WebApp, name: &str) -> Result<Option<String>, Error> {
    match cluster::get::<Secret>(app.metadata.namespace.as_deref(), name) {
        Ok(secret) => Ok(Some(secret.metadata.resource_version.unwrap_or_default())),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a status that says the WebApp was not applied, with one Warning Event the
/// first time (the status write does not wake the key: only spec changes do).
fn write_status(
    target: &ObjectRef,
    app: &WebApp,
    status: &webapp::WebAppStatus,
    reason: &str,
    note: &str,
) -> Result<(), Error> {
    if app.status.as_ref() == Some(status) {
        return Ok(());
    }
    cluster::record_event(target, EventType::Warning, reason, note)?;
    cluster::patch_status(target, status)
}

fn requeue_after(period: Duration) -> Action {
    Action::RequeueAfter(u64::try_from(period.as_millis()).unwrap_or(u64::MAX))
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
