//! Who owns which fields of a stored object, as server-side apply keeps it: an
//! applied configuration merged in, the conflicts with other managers worded as the
//! API server words them, and the parts of an object that are owned at all.

use std::collections::BTreeSet;

use serde_json::Value;
use wcm_core::contract::Cause;

use super::{StoreError, Stored};
use crate::testkit::fields::{self, FieldPath};

pub(super) fn merge_applied(
    stored: &mut Stored,
    config: &Value,
    applied: &[(FieldPath, Value)],
    manager: &str,
    force: bool,
) -> Result<(), StoreError> {
    let conflicts = stored.owners.conflicts(manager, applied, &stored.object);
    if !conflicts.is_empty() && !force {
        let causes = (conflicts.iter())
            .map(|(manager, path)| Cause {
                field: fields::display(path),
                reason: "FieldManagerConflict".into(),
                message: conflict_with(config, manager),
                manager: Some(manager.clone()),
            })
            .collect();
        return Err(StoreError::ApplyConflict(
            conflict_message(config, &conflicts),
            causes,
        ));
    }
    for (other, path) in &conflicts {
        stored.owners.take_from(other, path);
    }
    let paths: BTreeSet<FieldPath> = applied.iter().map(|(p, _)| p.clone()).collect();
    for path in stored.owners.applied(manager, paths) {
        fields::remove_at(&mut stored.object, &path);
    }
    for (path, value) in applied {
        fields::set_at(&mut stored.object, path, value.clone());
    }
    stored.object["apiVersion"] = config["apiVersion"].clone();
    Ok(())
}

/// The API server's wording: `Apply failed with 1 conflict: conflict with "m" using
/// apps/v1: .spec.replicas`.
pub(super) fn conflict_message(config: &Value, conflicts: &[(String, FieldPath)]) -> String {
    let each: Vec<String> = conflicts
        .iter()
        .map(|(m, p)| format!("{}: {}", conflict_with(config, m), fields::display(p)))
        .collect();
    let plural = if each.len() == 1 { "" } else { "s" };
    format!(
        "Apply failed with {} conflict{plural}: {}",
        each.len(),
        each.join("; ")
    )
}

/// One conflict's cause message: `conflict with "m" using apps/v1`.
pub(super) fn conflict_with(config: &Value, manager: &str) -> String {
    let version = config["apiVersion"].as_str().unwrap_or_default();
    format!("conflict with \"{manager}\" using {version}")
}

pub(super) fn label_path(key: &str) -> FieldPath {
    vec!["metadata".into(), "labels".into(), key.into()]
}

/// The fields of an object a manager can own: everything but its address, status
/// and what the API server sets.
pub(super) fn owned_part(object: &Value) -> Value {
    let mut owned = object.clone();
    if let Some(map) = owned.as_object_mut() {
        for key in ["apiVersion", "kind", "status"] {
            map.remove(key);
        }
    }
    if let Some(meta) = owned.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(key);
        }
        if meta.is_empty() {
            owned.as_object_mut().map(|m| m.remove("metadata"));
        }
    }
    owned
}

pub(super) fn leaf_paths(value: &Value) -> Vec<FieldPath> {
    fields::leaves(value).into_iter().map(|(p, _)| p).collect()
}

/// What `generation` counts changes of: everything but metadata and status.
pub(super) fn spec_part(object: &Value) -> Value {
    let mut spec = object.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    spec
}
