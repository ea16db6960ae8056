//! The state a run leaves the in-memory cluster in, as fault exploration compares
//! it: every object without what differs legitimately between two correct runs
//! (resourceVersion, uid, generation, creation time, owners' uids, generated name
//! suffixes) and without the fields the user said to ignore, and the Events
//! recorded, their counts and notes left out.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::memory::MemoryCluster;
use super::report::Report;
use super::store::describe;

/// Bookkeeping the API server writes, never the controller's doing.
const BOOKKEEPING: [&str; 5] = [
    "/metadata/resourceVersion",
    "/metadata/uid",
    "/metadata/generation",
    "/metadata/creationTimestamp",
    "/metadata/managedFields",
];

/// A run's end state.
#[derive(Debug, Clone, PartialEq)]
pub struct EndState {
    /// Each object by name (a generated name by its prefix and rank).
    objects: BTreeMap<String, Value>,
    /// Each Event as `regarding: type reason`.
    events: BTreeSet<String>,
}

/// How two end states differ.
#[derive(Debug, Clone, PartialEq)]
pub struct StateDiff {
    /// The objects that differ or are on one side only (`Events` for the Events).
    pub objects: Vec<String>,
    /// A unified diff of the two states as YAML.
    pub text: String,
}

impl EndState {
    /// The state of `cluster` after a run whose report is `report`, without the
    /// fields at the JSON pointers of `ignore` (`/status/lastRun`).
    pub fn of(cluster: &MemoryCluster, report: &Report, ignore: &[String]) -> EndState {
        let world = cluster.world();
        let mut generated: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut objects = BTreeMap::new();
        for (id, object) in world.store.objects() {
            let mut object = object.clone();
            for pointer in BOOKKEEPING
                .iter()
                .copied()
                .chain(ignore.iter().map(String::as_str))
            {
                remove_at(&mut object, pointer);
            }
            forget_owner_uids(&mut object);
            match generated_prefix(&object) {
                Some(prefix) => {
                    remove_at(&mut object, "/metadata/name");
                    let name = format!("{}…", describe(&object, &id.with_name(prefix)));
                    generated.entry(name).or_default().push(object);
                }
                None => _ = objects.insert(describe(&object, id), object),
            }
        }
        for (name, mut alike) in generated {
            alike.sort_by_key(Value::to_string);
            for (rank, object) in alike.into_iter().enumerate() {
                objects.insert(format!("{name} #{}", rank + 1), object);
            }
        }
        let events = (report.events.iter())
            .chain(report.steps.iter().flat_map(|s| &s.events))
            .map(|e| format!("{}: {} {}", e.regarding, e.type_, e.reason))
            .collect();
        EndState { objects, events }
    }

    /// How this state differs from `base`; none if it does not.
    pub fn differences(&self, base: &EndState) -> Option<StateDiff> {
        if self == base {
            return None;
        }
        let names: BTreeSet<&String> = self.objects.keys().chain(base.objects.keys()).collect();
        let mut objects: Vec<String> = (names.into_iter())
            .filter(|n| self.objects.get(*n) != base.objects.get(*n))
            .cloned()
            .collect();
        if self.events != base.events {
            objects.push("Events".into());
        }
        let diff = similar::TextDiff::from_lines(&base.yaml(), &self.yaml())
            .unified_diff()
            .context_radius(3)
            .header("without the fault", "with the fault")
            .to_string();
        Some(StateDiff {
            objects,
            text: diff,
        })
    }

    fn yaml(&self) -> String {
        let value = serde_json::json!({"objects": self.objects, "events": self.events});
        serde_saphyr::to_string(&value).unwrap_or_else(|e| format!("(not rendered: {e})\n"))
    }
}

/// The `generateName` of an object whose name the store generated from it.
fn generated_prefix(object: &Value) -> Option<String> {
    let prefix = object.pointer("/metadata/generateName")?.as_str()?;
    let name = object.pointer("/metadata/name")?.as_str()?;
    name.starts_with(prefix).then(|| prefix.to_string())
}

/// Removes the field at `pointer`, if there is one.
fn remove_at(object: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(Value::Object(map)) = object.pointer_mut(parent) {
        map.remove(&last);
    }
}

/// Owners are named by kind and name; their uids change when they are made again.
fn forget_owner_uids(object: &mut Value) {
    let owners = object.pointer_mut("/metadata/ownerReferences");
    for owner in owners.and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(map) = owner.as_object_mut() {
            map.remove("uid");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(objects: &[(&str, Value)]) -> EndState {
        EndState {
            objects: objects
                .iter()
                .map(|(n, o)| (n.to_string(), o.clone()))
                .collect(),
            events: BTreeSet::new(),
        }
    }

    #[test]
    fn fields_are_removed_by_pointer_with_escapes() {
        let mut object = json!({"metadata": {"annotations": {"a.io/b": "x", "c": "y"}}});
        remove_at(&mut object, "/metadata/annotations/a.io~1b");
        remove_at(&mut object, "/no/such/field");
        assert_eq!(object, json!({"metadata": {"annotations": {"c": "y"}}}));
    }

    #[test]
    fn a_difference_names_the_objects_and_shows_both_sides() {
        let base = state(&[("v1/ConfigMap a/x", json!({"data": {"k": "1"}}))]);
        let other = state(&[
            ("v1/ConfigMap a/x", json!({"data": {"k": "2"}})),
            ("v1/ConfigMap a/y", json!({})),
        ]);
        assert_eq!(base.differences(&base.clone()), None);
        let diff = other.differences(&base).expect("differs");
        assert_eq!(diff.objects, ["v1/ConfigMap a/x", "v1/ConfigMap a/y"]);
        assert!(diff.text.contains("-      k: \"1\""), "{}", diff.text);
        assert!(diff.text.contains("+      k: \"2\""), "{}", diff.text);
    }
}
