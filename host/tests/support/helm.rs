//! The pinned helm (built by `control-plane/scripts/build.sh`) run on the chart, with
//! its configuration and caches in a directory of their own, and the objects of a
//! rendering read for comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use wcm_control_plane::ControlPlane;

use super::docs::repo;

/// The chart's directory.
pub fn chart() -> PathBuf {
    repo("charts/wasm-controller-manager")
}

/// Runs helm with `args` (against `kubeconfig`, if any); its standard output, or an
/// error with its standard error.
pub fn helm(args: &[&str], kubeconfig: Option<&Path>) -> Result<String> {
    helm_binary(&ControlPlane::helm(), args, kubeconfig)
}

/// [`helm`] with Helm 3, which most installs still run.
pub fn helm3(args: &[&str], kubeconfig: Option<&Path>) -> Result<String> {
    helm_binary(&ControlPlane::helm3(), args, kubeconfig)
}

fn helm_binary(binary: &Path, args: &[&str], kubeconfig: Option<&Path>) -> Result<String> {
    let home = tempfile::tempdir()?;
    let mut command = Command::new(binary);
    command
        .args(args)
        .current_dir(repo("."))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env_remove("KUBECONFIG");
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    let out = command.output().with_context(|| {
        format!(
            "{} (built by control-plane/scripts/build.sh)",
            binary.display()
        )
    })?;
    ensure!(
        out.status.success(),
        "helm {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Labels Helm's tooling expects and kustomize does not write.
const CHART_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];

/// The objects of a multi-document YAML stream by `kind namespace/name`, without the
/// chart's own labels (on objects and Pod templates).
pub fn objects(yaml: &str) -> Result<BTreeMap<String, Value>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).context("not YAML")?;
    let mut objects = BTreeMap::new();
    for mut object in documents.into_iter().filter(|d| !d.is_null()) {
        for path in ["/metadata", "/spec/template/metadata"] {
            let Some(metadata) = object.pointer_mut(path).and_then(Value::as_object_mut) else {
                continue;
            };
            if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
                labels.retain(|k, _| !CHART_LABELS.contains(&k.as_str()));
                if labels.is_empty() {
                    metadata.remove("labels");
                }
            }
        }
        whole_numbers(&mut object);
        let metadata = &object["metadata"];
        let key = format!(
            "{} {}/{}",
            object["kind"].as_str().unwrap_or(""),
            metadata["namespace"].as_str().unwrap_or(""),
            metadata["name"].as_str().unwrap_or("")
        );
        objects.insert(key, object);
    }
    Ok(objects)
}

/// Writes every whole number as an integer: kustomize rewrites a CRD's `minimum: 0.0`
/// as `0`, which is the same number.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 && f.abs() < 1e15 {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers),
        _ => {}
    }
}
