//! The status a WebApp reports: observed generation, replica counts and a `Ready`
//! condition that follows Kubernetes' conventions.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::webapp::{WebApp, WebAppStatus};

/// The condition type this controller maintains.
pub const READY: &str = "Ready";

/// Status for a WebApp whose Deployment was applied and came back as `deployment`.
pub fn from_deployment(app: &WebApp, deployment: &Deployment, now: Time) -> WebAppStatus {
    let desired = app.spec.replicas as i32;
    let observed = deployment.status.clone().unwrap_or_default();
    let ready = observed.ready_replicas.unwrap_or(0);
    let updated = observed.updated_replicas.unwrap_or(0);
    let caught_up = observed.observed_generation >= deployment.metadata.generation;
    let (status, reason, message) = if !caught_up {
        (
            "False",
            "Progressing",
            "the Deployment controller has not seen the new spec yet".to_string(),
        )
    } else if ready >= desired && updated >= desired {
        (
            "True",
            "Available",
            format!("{ready} of {desired} replicas ready"),
        )
    } else {
        (
            "False",
            "Progressing",
            format!("{ready} of {desired} replicas ready, {updated} updated"),
        )
    };
    WebAppStatus {
        observed_generation: app.metadata.generation,
        replicas: observed.replicas.unwrap_or(0),
        ready_replicas: ready,
        updated_replicas: updated,
        conditions: vec![condition(app, status, reason, &message, now)],
    }
}

/// Status for a WebApp whose spec cannot be applied; replica counts are kept as
/// last reported (the Deployment, if any, is left as it was).
pub fn invalid(app: &WebApp, problems: &[String], now: Time) -> WebAppStatus {
    let message = format!("invalid spec: {}", problems.join("; "));
    not_applied(app, "InvalidSpec", &message, now)
}

/// The status of a WebApp whose Secret does not exist (yet): not applied, and why.
pub fn secret_missing(app: &WebApp, secret: &str, now: Time) -> WebAppStatus {
    let message = format!("waiting for the Secret {secret}");
    not_applied(app, "SecretMissing", &message, now)
}

/// `Ready=False` for `reason`, the counts of the last Deployment seen kept.
fn not_applied(app: &WebApp, reason: &str, message: &str, now: Time) -> WebAppStatus {
    let previous = app.status.clone().unwrap_or_default();
    WebAppStatus {
        observed_generation: app.metadata.generation,
        conditions: vec![condition(app, "False", reason, message, now)],
        ..previous
    }
}

/// The `Ready` condition; `lastTransitionTime` moves only when `status` changes.
fn condition(app: &WebApp, status: &str, reason: &str, message: &str, now: Time) -> Condition {
    let previous = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now,
    };
    Condition {
        type_: READY.into(),
        status: status.into(),
        observed_generation: app.metadata.generation,
        last_transition_time,
        reason: reason.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::webapp::WebAppSpec;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("valid"))
    }

    fn app(replicas: i64, status: Option<WebAppStatus>) -> WebApp {
        WebApp {
            metadata: ObjectMeta {
                generation: Some(4),
                ..ObjectMeta::default()
            },
            spec: WebAppSpec {
                image: "nginx".into(),
                replicas,
                port: 80,
                env: vec![],
                secret_name: None,
            },
            status,
        }
    }

    fn deployment(ready: i32, updated: i32) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(7),
                ..ObjectMeta::default()
            },
            status: Some(DeploymentStatus {
                observed_generation: Some(7),
                replicas: Some(2),
                ready_replicas: Some(ready),
                updated_replicas: Some(updated),
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn ready_when_every_replica_is_ready_and_updated() {
        let s = from_deployment(&app(2, None), &deployment(2, 2), at(100));
        let c = &s.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Available")
        );
        assert_eq!(c.message, "2 of 2 replicas ready");
        assert_eq!(
            (s.observed_generation, c.observed_generation),
            (Some(4), Some(4))
        );
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let first = from_deployment(&app(2, None), &deployment(1, 2), at(100));
        let same = from_deployment(&app(2, Some(first.clone())), &deployment(0, 2), at(200));
        assert_eq!(same.conditions[0].last_transition_time, at(100));
        let flipped = from_deployment(&app(2, Some(same)), &deployment(2, 2), at(300));
        assert_eq!(flipped.conditions[0].last_transition_time, at(300));
    }

    #[test]
    fn an_unobserved_deployment_generation_is_progressing() {
        let mut d = deployment(2, 2);
        d.metadata.generation = Some(8);
        let s = from_deployment(&app(2, None), &d, at(100));
        assert_eq!(s.conditions[0].status, "False");
        assert!(s.conditions[0].message.contains("not seen the new spec"));
    }

    #[test]
    fn an_invalid_spec_says_why_and_keeps_the_counts() {
        let before = from_deployment(&app(2, None), &deployment(2, 2), at(100));
        let s = invalid(
            &app(-1, Some(before)),
            &["spec.replicas is -1".into()],
            at(200),
        );
        let c = &s.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InvalidSpec")
        );
        assert_eq!(c.message, "invalid spec: spec.replicas is -1");
        assert_eq!(s.ready_replicas, 2);
    }
}
