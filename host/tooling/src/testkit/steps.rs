//! Steps of a test run (`test --steps FILE`): changes made to the in-memory cluster
//! from outside the plugin, one step after another, the plugin converging in
//! between — a user editing an object, another controller writing a status, an
//! object deleted, time passing.
//!
//! ```yaml
//! steps:
//! - name: the WebApp scales to three
//!   apply:                 # as `kubectl apply --server-side --force-conflicts`
//!   - {apiVersion: demo.example.com/v1, kind: WebApp,
//!      metadata: {name: shop, namespace: demo}, spec: {replicas: 3}}
//! - name: the Deployment reports ready
//!   status:                # merged into the status, as another controller writes it
//!   - {apiVersion: apps/v1, kind: Deployment,
//!      metadata: {name: shop, namespace: demo}, status: {readyReplicas: 3}}
//! - name: the Secret is deleted
//!   delete:
//!   - {apiVersion: v1, kind: Secret, metadata: {name: creds, namespace: demo}}
//! - name: an hour later
//!   wait: 1h
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::fixtures::yaml_options;
use super::memory::MemoryCluster;

/// The field manager of the statuses a step writes: a controller other than the
/// plugin, so a plugin that applies the same fields sees a conflict.
pub const OTHER_CONTROLLER: &str = "other-controller";

/// Why a steps file cannot be used, or a step not made.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The file could not be read.
    #[error("{}: cannot read it: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The file is not a list of steps.
    #[error("{}: not a steps file (`steps:`, a list of steps): {cause}", path.display())]
    Yaml { path: PathBuf, cause: String },
    /// A step is malformed, or one of its changes cannot be made.
    #[error("{}: step {index} ({name:?}): {cause}", path.display())]
    Step {
        path: PathBuf,
        index: usize,
        name: String,
        cause: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepsFile {
    steps: Vec<StepSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepSpec {
    name: String,
    #[serde(default)]
    apply: Vec<Value>,
    #[serde(default)]
    status: Vec<Value>,
    #[serde(default)]
    delete: Vec<Value>,
    #[serde(default)]
    wait: Option<String>,
}

/// One change a step makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Server-side applied as the fixtures' manager, conflicts forced: created, or
    /// updated with the fields it leaves out removed.
    Apply(Value),
    /// Its `status` merged into the object's, as [`OTHER_CONTROLLER`].
    Status(Value),
    /// The object deleted (marked only while it has finalizers).
    Delete(Value),
}

/// One step: its changes, made in the order given, then virtual time passing.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What the step is, as the report names it.
    pub name: String,
    /// Its changes: applies, then statuses, then deletions.
    pub changes: Vec<Change>,
    /// Virtual time that passes once the plugin has converged on the changes.
    pub wait: Option<Duration>,
}

/// A steps file's steps; `path` for the messages of the changes made later.
#[derive(Debug, Clone, Default)]
pub struct Steps {
    /// The file, named in every error about a step.
    pub path: PathBuf,
    /// The steps in order.
    pub steps: Vec<Step>,
}

impl Steps {
    /// The steps of the file at `path`, if there is one; none else.
    pub fn of(path: Option<&Path>) -> Result<Steps, StepError> {
        path.map_or_else(|| Ok(Steps::default()), Steps::read)
    }

    /// Reads the steps file at `path`.
    pub fn read(path: &Path) -> Result<Steps, StepError> {
        let text = std::fs::read_to_string(path).map_err(|cause| StepError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        let file: StepsFile =
            serde_saphyr::from_str_with_options(&text, yaml_options()).map_err(|e| {
                StepError::Yaml {
                    path: path.to_path_buf(),
                    cause: e.to_string(),
                }
            })?;
        let mut steps = Vec::new();
        for (index, spec) in file.steps.into_iter().enumerate() {
            let name = spec.name.clone();
            let step = step_of(spec).map_err(|cause| StepError::Step {
                path: path.to_path_buf(),
                index: index + 1,
                name,
                cause,
            })?;
            steps.push(step);
        }
        let path = path.to_path_buf();
        Ok(Steps { path, steps })
    }

    /// Whether any step lets time pass (the run is then in virtual time).
    pub fn wait(&self) -> bool {
        self.steps.iter().any(|s| s.wait.is_some())
    }

    /// Makes the changes of step `index` (from 0) on `cluster`; the watches see them
    /// as an informer would, so the keys they map to are woken.
    pub fn make(&self, index: usize, cluster: &MemoryCluster) -> Result<(), StepError> {
        let step = &self.steps[index];
        for change in &step.changes {
            cluster
                .change_from_outside(change)
                .map_err(|cause| StepError::Step {
                    path: self.path.clone(),
                    index: index + 1,
                    name: step.name.clone(),
                    cause,
                })?;
        }
        Ok(())
    }
}

fn step_of(spec: StepSpec) -> Result<Step, String> {
    let wait = match &spec.wait {
        Some(text) => {
            Some(humantime::parse_duration(text).map_err(|e| format!("wait {text:?}: {e}"))?)
        }
        None => None,
    };
    let changes: Vec<Change> = (spec.apply.into_iter().map(Change::Apply))
        .chain(spec.status.into_iter().map(Change::Status))
        .chain(spec.delete.into_iter().map(Change::Delete))
        .collect();
    if changes.is_empty() && wait.is_none() {
        return Err(
            "it changes nothing and waits for nothing (apply, status, delete, wait)".into(),
        );
    }
    for change in &changes {
        if let Change::Status(object) = change
            && !object.get("status").is_some_and(Value::is_object)
        {
            return Err("a status change needs the object's `status` (a mapping)".into());
        }
    }
    Ok(Step {
        name: spec.name,
        changes,
        wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps_of(text: &str) -> Result<Steps, StepError> {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("steps.yaml");
        std::fs::write(&path, text).expect("write");
        Steps::read(&path)
    }

    #[test]
    fn a_step_holds_its_changes_in_order_and_its_wait() {
        let steps = steps_of(
            "steps:\n- name: edit\n  delete: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n  \
             apply: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]\n\
             - name: later\n  wait: 1h 30m\n",
        )
        .expect("read");
        assert_eq!(steps.steps.len(), 2);
        let kinds: Vec<&str> = (steps.steps[0].changes.iter())
            .map(|c| match c {
                Change::Apply(_) => "apply",
                Change::Status(_) => "status",
                Change::Delete(_) => "delete",
            })
            .collect();
        assert_eq!(kinds, ["apply", "delete"]);
        assert_eq!(steps.steps[1].wait, Some(Duration::from_secs(5400)));
        assert!(steps.wait());
    }

    #[test]
    fn a_bad_step_is_named_by_its_number_and_name() {
        let empty = steps_of("steps:\n- name: nothing\n").expect_err("refused");
        assert!(
            empty
                .to_string()
                .contains("step 1 (\"nothing\"): it changes nothing"),
            "{empty}"
        );
        let wait = steps_of("steps:\n- name: soon\n  wait: soon\n").expect_err("refused");
        assert!(wait.to_string().contains("wait \"soon\""), "{wait}");
        let status =
            "steps:\n- name: s\n  status: [{apiVersion: v1, kind: Pod, metadata: {name: p}}]\n";
        let status = steps_of(status).expect_err("refused");
        assert!(
            status.to_string().contains("needs the object's `status`"),
            "{status}"
        );
        let unknown = steps_of("steps:\n- name: x\n  patch: []\n").expect_err("refused");
        assert!(
            unknown.to_string().contains("not a steps file"),
            "{unknown}"
        );
    }
}
