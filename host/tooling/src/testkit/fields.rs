//! Field ownership for the test kit's server-side apply: which field manager set which
//! field, the conflicts an apply meets, and the fields it gives up.
//!
//! Written here because server-side apply exists only inside the API server (its Go
//! library, structured-merge-diff); no Rust crate implements it. This keeps the part a
//! plugin's tests rely on: maps are merged key by key; lists and scalars are owned
//! whole (the API server merges some lists by key, such as containers by name: here a
//! list is one field); a field another manager set to a different value is a
//! conflict unless forced; a field a manager applied before and leaves out now is
//! removed unless another manager owns it too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// A field: the keys from the object's root, e.g. `["spec", "replicas"]`.
pub type FieldPath = Vec<String>;

/// A field as the API server names it in conflicts: `.spec.replicas`.
pub fn display(path: &FieldPath) -> String {
    path.iter().map(|key| format!(".{key}")).collect()
}

/// The leaf fields of `value`: maps are walked key by key; scalars, lists and empty
/// maps are leaves.
pub fn leaves(value: &Value) -> Vec<(FieldPath, Value)> {
    let mut found = Vec::new();
    walk(value, &mut Vec::new(), &mut found);
    found
}

fn walk(value: &Value, at: &mut FieldPath, found: &mut Vec<(FieldPath, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                at.push(key.clone());
                walk(inner, at, found);
                at.pop();
            }
        }
        leaf => found.push((at.clone(), leaf.clone())),
    }
}

/// The value at `path`, if there is one.
pub fn value_at<'a>(value: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// Sets `path` to `new`, making the maps on the way (replacing non-maps there).
pub fn set_at(value: &mut Value, path: &FieldPath, new: Value) {
    let Some((last, parents)) = path.split_last() else {
        *value = new;
        return;
    };
    let mut at = value;
    for key in parents {
        at = ensure_map(at).entry(key.clone()).or_insert(Value::Null);
    }
    ensure_map(at).insert(last.clone(), new);
}

fn ensure_map(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("made a map above")
}

/// Removes the field at `path`, and the maps it leaves empty.
pub fn remove_at(value: &mut Value, path: &FieldPath) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(Value::Object(map)) = value_at_mut(value, parents) {
        map.remove(last);
        if map.is_empty() && !parents.is_empty() {
            remove_at(value, &parents.to_vec());
        }
    }
}

fn value_at_mut<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, key| v.get_mut(key))
}

/// Whether one field contains the other (or they are the same).
fn overlaps(a: &FieldPath, b: &FieldPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The fields each manager owns in one object.
#[derive(Debug, Default, Clone)]
pub struct Ownership {
    managers: BTreeMap<String, BTreeSet<FieldPath>>,
}

impl Ownership {
    /// Adds `paths` to what `manager` owns, beside any other owner.
    pub fn share(&mut self, manager: &str, paths: impl IntoIterator<Item = FieldPath>) {
        self.managers
            .entry(manager.to_string())
            .or_default()
            .extend(paths);
    }

    /// `manager` changed `path` by an update (not an apply): it owns it alone now.
    pub fn take(&mut self, manager: &str, path: FieldPath) {
        self.release(&path);
        self.share(manager, [path]);
    }

    /// Nobody owns `path` (or anything inside it) any more.
    pub fn release(&mut self, path: &FieldPath) {
        for owned in self.managers.values_mut() {
            owned.retain(|p| !overlaps(p, path));
        }
        self.managers.retain(|_, owned| !owned.is_empty());
    }

    /// The managers other than `manager` owning a field `applied` would change in
    /// `current`, with the applied field: the conflicts of an apply.
    pub fn conflicts(
        &self,
        manager: &str,
        applied: &[(FieldPath, Value)],
        current: &Value,
    ) -> Vec<(String, FieldPath)> {
        let changed = applied
            .iter()
            .filter(|(path, value)| value_at(current, path) != Some(value));
        let mut found = Vec::new();
        for (path, _) in changed {
            for (other, owned) in &self.managers {
                if other != manager && owned.iter().any(|p| overlaps(p, path)) {
                    found.push((other.clone(), path.clone()));
                }
            }
        }
        found
    }

    /// Takes `path` from `other` (a forced apply).
    pub fn take_from(&mut self, other: &str, path: &FieldPath) {
        if let Some(owned) = self.managers.get_mut(other) {
            owned.retain(|p| !overlaps(p, path));
        }
        self.managers.retain(|_, owned| !owned.is_empty());
    }

    /// Records an apply by `manager` of exactly `applied`; returns the fields it
    /// owned before, left out now and owned by nobody else: the fields to remove.
    pub fn applied(&mut self, manager: &str, applied: BTreeSet<FieldPath>) -> Vec<FieldPath> {
        let before = self.managers.remove(manager).unwrap_or_default();
        let dropped = before
            .difference(&applied)
            .filter(|p| {
                !self
                    .managers
                    .values()
                    .any(|o| o.iter().any(|q| overlaps(p, q)))
            })
            .filter(|p| !applied.iter().any(|q| overlaps(p, q)))
            .cloned()
            .collect();
        if !applied.is_empty() {
            self.managers.insert(manager.to_string(), applied);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(p: &str) -> FieldPath {
        p.split('.').skip(1).map(str::to_string).collect()
    }

    #[test]
    fn maps_are_walked_and_lists_are_leaves() {
        let value = json!({"spec": {"replicas": 2, "ports": [1, 2], "empty": {}}});
        let found: Vec<String> = leaves(&value).iter().map(|(p, _)| display(p)).collect();
        assert_eq!(found, [".spec.empty", ".spec.ports", ".spec.replicas"]);
    }

    #[test]
    fn setting_makes_maps_and_removing_prunes_them() {
        let mut value = json!({});
        set_at(&mut value, &path(".metadata.labels.a"), json!("1"));
        assert_eq!(value, json!({"metadata": {"labels": {"a": "1"}}}));
        remove_at(&mut value, &path(".metadata.labels.a"));
        assert_eq!(value, json!({}));
    }

    #[test]
    fn a_field_another_manager_set_differently_conflicts_until_taken() {
        let mut owners = Ownership::default();
        owners.share("owner", [path(".spec.replicas")]);
        let current = json!({"spec": {"replicas": 3}});
        let same = [(path(".spec.replicas"), json!(3))];
        assert!(owners.conflicts("pinner", &same, &current).is_empty());
        let different = [(path(".spec.replicas"), json!(1))];
        assert_eq!(
            owners.conflicts("pinner", &different, &current),
            [("owner".to_string(), path(".spec.replicas"))]
        );
        owners.take_from("owner", &path(".spec.replicas"));
        assert!(owners.conflicts("pinner", &different, &current).is_empty());
    }

    #[test]
    fn a_field_left_out_of_the_next_apply_is_dropped_unless_shared() {
        let mut owners = Ownership::default();
        let first = [path(".spec.a"), path(".spec.b")].into();
        assert!(owners.applied("me", first).is_empty());
        owners.share("other", [path(".spec.b")]);
        let dropped = owners.applied("me", BTreeSet::new());
        assert_eq!(dropped, [path(".spec.a")]);
    }
}
