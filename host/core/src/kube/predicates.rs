//! A watch's update predicates applied to a cache change before a key is queued, as
//! controller-runtime's predicates filter events before its work queue: creates,
//! deletes and resyncs pass; an update passes when any predicate holds between the
//! object before and after it (or when the watch has none).

use super::cache::{CachedObject, Change};
use crate::contract::Predicate;

/// Whether `change` should queue its keys under `predicates`.
pub fn passes(predicates: &[Predicate], change: &Change) -> bool {
    match change {
        Change::Applied {
            new,
            old: Some(old),
        } if !predicates.is_empty() => predicates.iter().any(|p| holds(*p, old, new)),
        _ => true,
    }
}

fn holds(predicate: Predicate, old: &CachedObject, new: &CachedObject) -> bool {
    let (before, after) = (&old.marks, &new.marks);
    match predicate {
        Predicate::GenerationChanged => before.generation != after.generation,
        Predicate::LabelsChanged => old.labels != new.labels,
        Predicate::AnnotationsChanged => before.annotations != after.annotations,
        Predicate::FinalizersChanged => before.finalizers != after.finalizers,
        Predicate::DeletionStarted => !before.deleting && after.deleting,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::DynamicObject;
    use serde_json::{Value, json};

    use super::*;

    fn object(meta: Value) -> Arc<CachedObject> {
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "WebApp",
            "metadata": {"name": "shop", "namespace": "a", "generation": 1,
                "labels": {"app": "web"}, "annotations": {"note": "x"},
                "finalizers": ["example.com/cleanup"]}, "status": {"ready": false}});
        for (k, v) in meta.as_object().expect("object") {
            obj["metadata"][k] = v.clone();
        }
        let obj: DynamicObject = serde_json::from_value(obj).expect("object");
        Arc::new(CachedObject::from_dynamic(obj).expect("serialises"))
    }

    fn update(old: Value, new: Value) -> Change {
        Change::Applied {
            old: Some(object(old)),
            new: object(new),
        }
    }

    #[test]
    fn an_update_passes_only_when_a_predicate_holds() {
        let status_only = update(json!({}), json!({}));
        let cases = [
            (Predicate::GenerationChanged, json!({"generation": 2})),
            (Predicate::LabelsChanged, json!({"labels": {"app": "api"}})),
            (Predicate::AnnotationsChanged, json!({"annotations": {}})),
            (Predicate::FinalizersChanged, json!({"finalizers": []})),
            (
                Predicate::DeletionStarted,
                json!({"deletionTimestamp": "2026-12-04T08:00:00Z"}),
            ),
        ];
        for (predicate, changed) in cases {
            assert!(
                passes(&[predicate], &update(json!({}), changed.clone())),
                "{predicate}"
            );
            assert!(
                !passes(&[predicate], &status_only),
                "{predicate} on a status change"
            );
        }
        let labels = update(json!({}), json!({"labels": {"app": "api"}}));
        assert!(!passes(&[Predicate::GenerationChanged], &labels));
        assert!(passes(
            &[Predicate::GenerationChanged, Predicate::LabelsChanged],
            &labels
        ));
    }

    #[test]
    fn creates_deletes_and_unfiltered_watches_always_pass() {
        let only = [Predicate::GenerationChanged];
        assert!(passes(&only, &Change::added(object(json!({})))));
        assert!(passes(&only, &Change::Deleted(object(json!({})))));
        assert!(passes(&[], &update(json!({}), json!({}))));
    }
}
