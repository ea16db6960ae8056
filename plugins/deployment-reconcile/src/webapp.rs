//! The WebApp custom resource as this controller reads it, and its validation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::Deserialize;
use wasm_controller_sdk::Gvk;

/// `demo.wasm-controller-manager.io/v1alpha1`, kind `WebApp`.
pub fn kind() -> Gvk {
    Gvk::new("demo.wasm-controller-manager.io", "v1alpha1", "WebApp")
}

/// A WebApp; only the fields the controller reads.
#[derive(Debug, Clone, Deserialize)]
pub struct WebApp {
    /// Name, namespace, uid, generation.
    pub metadata: ObjectMeta,
    /// What should run.
    #[serde(default)]
    pub spec: WebAppSpec,
    /// What the controller last reported.
    #[serde(default)]
    pub status: Option<WebAppStatus>,
}

/// What should run: one container, this many replicas.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// The container image.
    #[serde(default)]
    pub image: String,
    /// Desired Pods (the CRD defaults it to 1).
    #[serde(default = "one")]
    pub replicas: i64,
    /// The container port (the CRD defaults it to 8080).
    #[serde(default = "http_alt")]
    pub port: i64,
    /// Environment variables of the container.
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// The Secret (same namespace) whose keys become the container's environment; the
    /// WebApp is not applied until it exists.
    #[serde(default)]
    pub secret_name: Option<String>,
}

fn one() -> i64 {
    1
}

fn http_alt() -> i64 {
    8080
}

/// One environment variable.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct EnvVar {
    /// Its name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: Option<String>,
}

/// The status the controller reports.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the Deployment has.
    #[serde(default)]
    pub replicas: i32,
    /// Pods ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pods running the current template.
    #[serde(default)]
    pub updated_replicas: i32,
    /// `Ready`, following Kubernetes' condition conventions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Why a spec cannot be turned into a Deployment; the message is shown to users.
pub fn problems(spec: &WebAppSpec) -> Vec<String> {
    let mut found = Vec::new();
    if spec.image.trim().is_empty() {
        found.push("spec.image is empty".to_string());
    }
    if spec.replicas < 0 || spec.replicas > i64::from(i32::MAX) {
        found.push(format!(
            "spec.replicas is {}; it must be 0 or more",
            spec.replicas
        ));
    }
    if !(1..=65535).contains(&spec.port) {
        found.push(format!("spec.port is {}; it must be 1 to 65535", spec.port));
    }
    if spec.secret_name.as_deref().is_some_and(|n| !is_dns_name(n)) {
        found.push("spec.secretName is not a DNS-1123 name".to_string());
    }
    for var in &spec.env {
        if var.name.is_empty() {
            found.push("spec.env has a variable without a name".to_string());
        }
    }
    found
}

/// Whether `name` is a DNS-1123 subdomain, as Secret names are.
fn is_dns_name(name: &str) -> bool {
    let fits = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=253).contains(&name.len())
        && name.chars().all(fits)
        && ends(name.chars().next())
        && ends(name.chars().last())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(image: &str, replicas: i64) -> WebAppSpec {
        WebAppSpec {
            image: image.into(),
            replicas,
            port: 8080,
            env: vec![],
            secret_name: None,
        }
    }

    #[test]
    fn a_good_spec_has_no_problems() {
        assert!(problems(&spec("nginx:1.27", 2)).is_empty());
        assert!(
            problems(&spec("nginx:1.27", 0)).is_empty(),
            "scaled to zero is fine"
        );
    }

    #[test]
    fn every_problem_is_named() {
        let found = problems(&spec(" ", -1));
        assert_eq!(
            found,
            vec![
                "spec.image is empty",
                "spec.replicas is -1; it must be 0 or more"
            ]
        );
    }

    #[test]
    fn omitted_fields_take_the_crd_defaults() {
        let app: WebApp = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"}, "spec": {"image": "nginx"}
        }))
        .expect("decodes");
        assert_eq!((app.spec.replicas, app.spec.port), (1, 8080));
        assert_eq!(app.spec.secret_name, None);
    }

    #[test]
    fn a_secret_name_must_be_a_dns_name() {
        for (name, good) in [
            ("db-credentials", true),
            ("a.b", true),
            ("Db", false),
            ("-x", false),
        ] {
            let mut s = spec("nginx", 1);
            s.secret_name = Some(name.into());
            assert_eq!(problems(&s).is_empty(), good, "{name}");
        }
    }
}
