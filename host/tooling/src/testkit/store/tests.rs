//! The store's bookkeeping: applies, ownership, generations, deletion and dependents.

use super::*;

fn id(kind: &str, name: &str) -> ObjectId {
    ObjectId {
        group: "apps".into(),
        kind: kind.into(),
        namespace: Some("shop".into()),
        name: name.into(),
    }
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": spec})
}

#[test]
fn a_field_an_apply_leaves_out_is_removed_and_generation_counts_spec_changes() {
    let mut store = Store::default();
    let web = id("Deployment", "web");
    let config = deployment(json!({"replicas": 2, "paused": true}));
    let (created, _) = store.apply(&web, &config, "me", false).expect("created");
    assert_eq!(created["metadata"]["generation"], 1);
    let (stored, changed) =
        (store.apply(&web, &deployment(json!({"replicas": 2})), "me", false)).expect("applied");
    assert_eq!(stored["spec"], json!({"replicas": 2}));
    assert_eq!(stored["metadata"]["generation"], 2);
    assert!(changed.is_some());
    let labels = [("a".to_string(), "b".to_string())];
    store
        .patch_labels(&web, &labels, &[], "me")
        .expect("labelled");
    assert_eq!(store.get(&web).expect("ok")["metadata"]["generation"], 2);
    let again = store
        .patch_labels(&web, &labels, &[], "me")
        .expect("labelled");
    assert!(again.is_none(), "an unchanged object is no change");
}

#[test]
fn deleting_an_owner_deletes_its_dependents_or_orphans_them() {
    let mut store = Store::default();
    let owner = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "uid": "u-1"}});
    let dependent = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "ownerReferences": [{"uid": "u-1"}]}});
    store
        .insert(id("Deployment", "web"), owner.clone())
        .expect("ok");
    store
        .insert(id("ReplicaSet", "web-1"), dependent.clone())
        .expect("ok");
    let changes = (store.delete(
        &id("Deployment", "web"),
        &DeleteOptions::unconditional(Propagation::Background),
    ))
    .expect("ok");
    assert_eq!(changes.len(), 2);
    assert!(store.get(&id("ReplicaSet", "web-1")).is_none());

    store.insert(id("Deployment", "web"), owner).expect("ok");
    store
        .insert(id("ReplicaSet", "web-1"), dependent)
        .expect("ok");
    (store.delete(
        &id("Deployment", "web"),
        &DeleteOptions::unconditional(Propagation::Orphan),
    ))
    .expect("ok");
    let orphan = store.get(&id("ReplicaSet", "web-1")).expect("kept");
    assert_eq!(orphan["metadata"]["ownerReferences"], json!([]));
}

#[test]
fn an_object_with_finalizers_is_only_marked_for_deletion() {
    let mut store = Store::default();
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["example.com/cleanup"]}});
    store.insert(id("Deployment", "web"), object).expect("ok");
    (store.delete(
        &id("Deployment", "web"),
        &DeleteOptions::unconditional(Propagation::Background),
    ))
    .expect("ok");
    let marked = store.get(&id("Deployment", "web")).expect("still there");
    assert_eq!(marked["metadata"]["deletionTimestamp"], CLOCK);
    // Removing another finalizer than the last one keeps it; the last one lets it go.
    let web = id("Deployment", "web");
    let version = |store: &Store| {
        let object = store.get(&web).expect("there");
        object["metadata"]["resourceVersion"]
            .as_str()
            .expect("set")
            .to_string()
    };
    let both = [
        "example.com/cleanup".to_string(),
        "example.com/second".to_string(),
    ];
    let read = version(&store);
    (store.set_finalizers(&web, &read, &both)).expect("added");
    let stale = store.set_finalizers(&web, &read, &[]);
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let second = ["example.com/second".to_string()];
    (store.set_finalizers(&web, &version(&store), &second)).expect("removed one");
    let kept = store.get(&web).expect("still held");
    assert_eq!(
        kept["metadata"]["finalizers"],
        json!(["example.com/second"])
    );
    let (_, gone) = (store.set_finalizers(&web, &version(&store), &[])).expect("removed the last");
    assert!(store.get(&web).is_none(), "released");
    assert!(
        gone.iter().any(|c| c.after.is_none()),
        "watchers see the deletion"
    );
    let missing = store.delete(
        &id("Deployment", "gone"),
        &DeleteOptions::unconditional(Propagation::Background),
    );
    assert_eq!(missing.expect_err("refused"), StoreError::NotFound);
}
