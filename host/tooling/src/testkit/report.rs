//! What `wasm-controller-manager test` prints: the reconciles, writes and Events of a
//! run, as YAML, and how it compares with an expected file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything a plugin did in one run, in the order it did it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The plugin's registered name.
    pub plugin: String,
    /// Each reconcile: the key and what came of it.
    pub reconciles: Vec<Reconciled>,
    /// Each write the plugin asked for, with its error if it failed.
    pub writes: Vec<Write>,
    /// The Events it recorded, repeats counted.
    pub events: Vec<Event>,
    /// With `--steps`: what it did after each step's changes, step by step (the
    /// fields above are then what it did on the fixtures alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// Its own metrics at the end, as `/metrics` would show them (samples only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<String>,
    /// In virtual time (`--for`): the keys still scheduled when the time was up —
    /// a periodic check, or a plugin that never settles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
}

/// What the plugin did in one step of a run: from the step's changes until it
/// converged (and the step's time passed).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The step's name, as the steps file gives it.
    pub step: String,
    /// Each reconcile of the step.
    pub reconciles: Vec<Reconciled>,
    /// Each write of the step.
    pub writes: Vec<Write>,
    /// The Events of the step, repeats within it counted.
    pub events: Vec<Event>,
}

/// A key still scheduled at the end of a run in virtual time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// The key.
    pub key: String,
    /// When it would have run.
    pub at: String,
}

impl Pending {
    /// `key`, due at the virtual time `at`.
    pub fn of((key, at): (wcm_core::keys::ReconcileKey, std::time::Duration)) -> Pending {
        Pending {
            key: key.to_string(),
            at: humantime::format_duration(at).to_string(),
        }
    }
}

/// One reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reconciled {
    /// The key, as the host's log names it (`v1/Pod default/web`, `fixed key "all"`).
    pub key: String,
    /// `done`, `requeue-after 30s`, or the error.
    pub result: String,
    /// In virtual time (`--for`): when it ran, from the start of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// One write call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Write {
    /// The `cluster` function: `patch-labels`, `apply`, `create`, `patch`, `update`,
    /// `patch-status`, `delete`.
    pub call: String,
    /// The object written (`apps/v1/Deployment shop/web`).
    pub object: String,
    /// Labels set (`patch-labels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<BTreeMap<String, String>>,
    /// Labels removed (`patch-labels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<Vec<String>>,
    /// The object as the plugin applied, created or updated it (`apply`, `create`,
    /// `update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Value>,
    /// A `patch`: its kind (`merge`, `json`), subresource if any, and body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// Whether it forced conflicts (`apply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Finalizers added (`patch-finalizers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Vec<String>>,
    /// The status merged (`patch-status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// `background`, `foreground` or `orphan` (`delete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation: Option<String>,
    /// The uid and resourceVersion a `delete` required, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<String>,
    /// Why it failed, as the plugin was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Write {
    /// A write of `call` on `object`, its details still to be filled in.
    pub fn new(call: &str, object: impl ToString) -> Write {
        Write {
            call: call.to_string(),
            object: object.to_string(),
            set: None,
            remove: None,
            applied: None,
            patch: None,
            force: None,
            add: None,
            status: None,
            propagation: None,
            preconditions: None,
            error: None,
        }
    }
}

/// One Event, its repeats counted as the API server's Event series would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The object it is about.
    pub regarding: String,
    /// The second object it names, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The reason (`Counted`).
    pub reason: String,
    /// The action the plugin named, if it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The note.
    pub note: String,
    /// How many times it was recorded.
    pub count: u32,
}

/// Why a report could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report could not be rendered.
    #[error("cannot render the report as YAML: {0}")]
    Render(String),
    /// The expected file is not YAML.
    #[error("the expected file is not YAML: {0}")]
    Expected(String),
}

impl Report {
    /// The report as YAML, in the order of its fields.
    pub fn to_yaml(&self) -> Result<String, ReportError> {
        let mut yaml =
            serde_saphyr::to_string(self).map_err(|e| ReportError::Render(e.to_string()))?;
        if !yaml.ends_with('\n') {
            yaml.push('\n');
        }
        Ok(yaml)
    }

    /// Compares with an expected report (YAML): none if they are equal, else a
    /// unified diff from the expected to this one, both with their keys sorted.
    pub fn differences(&self, expected: &str) -> Result<Option<String>, ReportError> {
        let options = super::fixtures::yaml_options();
        let expected: Value = serde_saphyr::from_str_with_options(expected, options)
            .map_err(|e| ReportError::Expected(e.to_string()))?;
        let actual = serde_json::to_value(self).map_err(|e| ReportError::Render(e.to_string()))?;
        if expected == actual {
            return Ok(None);
        }
        let render =
            |v: &Value| serde_saphyr::to_string(v).map_err(|e| ReportError::Render(e.to_string()));
        let (expected, actual) = (render(&expected)?, render(&actual)?);
        let diff = similar::TextDiff::from_lines(&expected, &actual);
        let text = diff
            .unified_diff()
            .context_radius(3)
            .header("expected", "actual")
            .to_string();
        Ok(Some(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut write = Write::new("patch-labels", "v1/Node cp");
        write.set = Some([("example.com/pods".to_string(), "2".to_string())].into());
        Report {
            plugin: "pod-counter".into(),
            reconciles: vec![Reconciled {
                key: "fixed key \"all\"".into(),
                result: "done".into(),
                at: None,
            }],
            writes: vec![write],
            events: vec![],
            steps: vec![],
            metrics: vec![],
            pending: vec![],
        }
    }

    #[test]
    fn a_report_equals_its_own_yaml_whatever_the_key_order() {
        let yaml = report().to_yaml().expect("renders");
        assert!(yaml.contains("example.com/pods: \"2\""), "{yaml}");
        assert_eq!(report().differences(&yaml).expect("parses"), None);
        let reordered = "events: []\nwrites:\n- object: v1/Node cp\n  call: patch-labels\n  \
            set: {example.com/pods: \"2\"}\nreconciles:\n- {result: done, key: 'fixed key \"all\"'}\n\
            plugin: pod-counter\n";
        assert_eq!(report().differences(reordered).expect("parses"), None);
    }

    #[test]
    fn a_difference_is_shown_as_a_diff_of_the_changed_lines() {
        let mut expected = report();
        expected.writes[0].set = Some([("example.com/pods".into(), "3".into())].into());
        let diff = report()
            .differences(&expected.to_yaml().expect("renders"))
            .expect("parses")
            .expect("differs");
        assert!(diff.contains("-    example.com/pods: \"3\"\n"), "{diff}");
        assert!(diff.contains("+    example.com/pods: \"2\"\n"), "{diff}");
        assert!(
            diff.contains("--- expected") && diff.contains("+++ actual"),
            "{diff}"
        );
    }
}
