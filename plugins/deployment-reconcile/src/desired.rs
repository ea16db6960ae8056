//! The Deployment a WebApp asks for: the fields this controller owns, nothing else.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, PodSpec, PodTemplateSpec, SecretEnvSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use wasm_controller_sdk::{Error, owner};

use crate::webapp::{self, WebApp};

/// The label every Deployment of this controller carries; its watch selects on it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "deployment-reconcile");
/// The label that ties a Deployment's Pods to their WebApp.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// The Pod template annotation holding the resourceVersion of the WebApp's Secret: a
/// rotated Secret changes it, and the Deployment controller rolls the Pods, which read
/// the Secret's keys only when they start.
pub const SECRET_VERSION: &str = "demo.wasm-controller-manager.io/secret-version";

/// The Deployment for `app` (same name and namespace), owned by it as its controller;
/// `secret_version` is the resourceVersion of the Secret `spec.secretName` names, read
/// just before. Only what is set here is applied, so only these fields are owned by
/// the controller.
pub fn deployment(app: &WebApp, secret_version: Option<&str>) -> Result<Deployment, Error> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let selector = BTreeMap::from([(NAME_LABEL.to_string(), name.clone())]);
    let mut labels = selector.clone();
    labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    let mut metadata = ObjectMeta {
        name: Some(name),
        namespace: app.metadata.namespace.clone(),
        labels: Some(labels),
        ..ObjectMeta::default()
    };
    owner::set_controller_reference(&mut metadata, &webapp::kind(), &app.metadata)?;
    Ok(Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(app.spec.replicas as i32),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector),
                    annotations: secret_version
                        .map(|v| BTreeMap::from([(SECRET_VERSION.to_string(), v.to_string())])),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(app)),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    })
}

fn pod_spec(app: &WebApp) -> PodSpec {
    let env: Vec<EnvVar> = app
        .spec
        .env
        .iter()
        .map(|v| EnvVar {
            name: v.name.clone(),
            value: v.value.clone(),
            ..EnvVar::default()
        })
        .collect();
    PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some(app.spec.image.clone()),
            ports: Some(vec![ContainerPort {
                container_port: app.spec.port as i32,
                ..ContainerPort::default()
            }]),
            env: (!env.is_empty()).then_some(env),
            env_from: app.spec.secret_name.as_ref().map(|name| {
                vec![EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: name.clone(),
                        optional: Some(false),
                    }),
                    ..EnvFromSource::default()
                }]
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webapp::{EnvVar as AppEnv, WebAppSpec};

    fn app() -> WebApp {
        WebApp {
            metadata: ObjectMeta {
                name: Some("shop".into()),
                namespace: Some("demo".into()),
                uid: Some("1234".into()),
                ..ObjectMeta::default()
            },
            spec: WebAppSpec {
                image: "nginx:1.27".into(),
                replicas: 3,
                port: 80,
                env: vec![AppEnv {
                    name: "MODE".into(),
                    value: Some("prod".into()),
                }],
                secret_name: None,
            },
            status: None,
        }
    }

    #[test]
    fn the_deployment_mirrors_the_spec_and_is_owned_by_the_webapp() {
        let d = deployment(&app(), None).expect("built");
        assert_eq!(d.metadata.name.as_deref(), Some("shop"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("demo"));
        let owner = &d.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("WebApp", "shop", "1234")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = d.spec.expect("spec");
        assert_eq!(spec.replicas, Some(3));
        let selector = spec.selector.match_labels.expect("selector");
        assert_eq!(selector.get(NAME_LABEL).map(String::as_str), Some("shop"));
        let pod = spec.template.spec.expect("pod spec");
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some("nginx:1.27"));
        assert_eq!(
            container.ports.as_ref().expect("ports")[0].container_port,
            80
        );
        assert_eq!(
            container.env.as_ref().expect("env")[0].value.as_deref(),
            Some("prod")
        );
    }

    #[test]
    fn a_secret_becomes_the_environment_and_its_version_rolls_the_pods() {
        let mut app = app();
        app.spec.secret_name = Some("shop-credentials".into());
        let d = deployment(&app, Some("4711")).expect("built");
        let template = d.spec.expect("spec").template;
        let annotations = template.metadata.and_then(|m| m.annotations);
        let version = annotations.as_ref().and_then(|a| a.get(SECRET_VERSION));
        assert_eq!(version.map(String::as_str), Some("4711"));
        let container = &template.spec.expect("pod spec").containers[0];
        let from = container.env_from.as_ref().expect("envFrom");
        let secret = from[0].secret_ref.as_ref().expect("a Secret");
        assert_eq!(secret.name, "shop-credentials");
    }

    #[test]
    fn without_a_secret_there_is_no_annotation_and_no_env_from() {
        let d = deployment(&app(), None).expect("built");
        let template = d.spec.expect("spec").template;
        assert_eq!(template.metadata.and_then(|m| m.annotations), None);
        assert_eq!(
            template.spec.expect("pod spec").containers[0].env_from,
            None
        );
    }

    #[test]
    fn the_applied_json_names_its_kind_and_no_status() {
        let json = serde_json::to_value(deployment(&app(), None).expect("built")).expect("json");
        assert_eq!(json["apiVersion"], "apps/v1");
        assert_eq!(json["kind"], "Deployment");
        assert!(
            json.get("status").is_none(),
            "status is not the controller's to apply"
        );
    }
}
