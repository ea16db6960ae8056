//! The object cache's contract: swaps, read-your-writes with opaque versions, marks.

use serde_json::json;

use super::*;

fn pod(name: &str) -> Arc<CachedObject> {
    pod_at(name, "7")
}

fn pod_at(name: &str, version: &str) -> Arc<CachedObject> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"},
                     "resourceVersion": version,
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": {"containers": []},
    }))
    .expect("pod json");
    Arc::new(CachedObject::from_dynamic(obj).expect("serialise"))
}

#[test]
fn the_bytes_held_follow_every_change() {
    let cache = ObjectCache::default();
    let (a, b) = (pod("a"), pod("b"));
    let one = a.json.len();
    cache.apply(a);
    cache.apply(b.clone());
    assert_eq!(cache.bytes(), 2 * one);
    cache.apply(pod_at("a", "8")); // replaced, the same size
    assert_eq!(cache.bytes(), 2 * one);
    cache.delete(&b.key());
    assert_eq!(cache.bytes(), one);
    let fresh: HashMap<_, _> = [pod("c"), pod("d"), pod("e")]
        .into_iter()
        .map(|o| (o.key(), o))
        .collect();
    cache.replace(fresh);
    assert_eq!(cache.bytes(), 3 * one);
}

#[test]
fn cached_json_has_no_managed_fields() {
    let p = pod("a");
    assert!(!p.json.contains("managedFields"), "{}", p.json);
    assert!(p.json.contains("\"app\":\"web\""), "{}", p.json);
    assert_eq!(p.key(), (Some("ns".to_string()), "a".to_string()));
}

fn version_of(cache: &ObjectCache, name: &str) -> String {
    let obj = cache.get(Some("ns"), name).expect("cached");
    obj.resource_version.clone().expect("version")
}

#[test]
fn a_written_copy_is_read_back_until_the_watch_reaches_it() {
    let cache = ObjectCache::default();
    assert!(
        !cache.refresh(pod_at("a", "w1")),
        "absent objects come from the watch"
    );
    cache.apply(pod_at("a", "v1"));
    assert!(cache.refresh(pod_at("a", "w1")), "the plugin's write");
    assert_eq!(version_of(&cache, "a"), "w1");
    // Events the watch delivers before the write's own are older than it.
    cache.apply(pod_at("a", "v2"));
    assert_eq!(version_of(&cache, "a"), "w1", "an older event must not win");
    cache.apply(pod_at("a", "w1"));
    cache.apply(pod_at("a", "v3"));
    assert_eq!(
        version_of(&cache, "a"),
        "v3",
        "after the write, the watch rules"
    );
}

#[test]
fn a_write_the_watch_already_delivered_is_not_stored_over_newer_events() {
    let cache = ObjectCache::default();
    cache.apply(pod_at("a", "w1"));
    cache.apply(pod_at("a", "v2"));
    assert!(
        !cache.refresh(pod_at("a", "w1")),
        "stale: the watch passed it"
    );
    assert_eq!(version_of(&cache, "a"), "v2");
    assert!(!cache.refresh(pod_at("a", "v2")), "the same version");
}

#[tokio::test(start_paused = true)]
async fn a_written_copy_whose_event_never_comes_gives_way_after_a_while() {
    let cache = ObjectCache::default();
    cache.apply(pod_at("a", "v1"));
    assert!(cache.refresh(pod_at("a", "w1")));
    tokio::time::advance(WRITTEN_COPY_TTL).await;
    cache.apply(pod_at("a", "v2"));
    assert_eq!(version_of(&cache, "a"), "v2");
}

#[test]
fn a_writes_own_event_is_a_change_from_what_the_watch_delivered_before_it() {
    let cache = ObjectCache::default();
    cache.apply(pod_at("a", "v1"));
    // The write's response arrives first: its copy is read back, and when its
    // event comes the change is from v1, as if the event had come first.
    assert!(cache.refresh(pod_at("a", "w1")));
    assert!(
        cache.refresh(pod_at("a", "w2")),
        "a second write before either event"
    );
    let Change::Applied {
        old: Some(old),
        new,
    } = cache.apply(pod_at("a", "w2"))
    else {
        panic!("an update");
    };
    assert_eq!(old.resource_version.as_deref(), Some("v1"));
    assert_eq!(new.resource_version.as_deref(), Some("w2"));
    let Change::Applied { old: Some(old), .. } = cache.apply(pod_at("a", "v3")) else {
        panic!("an update");
    };
    assert_eq!(
        old.resource_version.as_deref(),
        Some("w2"),
        "then the watch rules"
    );
}

#[test]
fn versions_are_not_compared_as_numbers() {
    let cache = ObjectCache::default();
    cache.apply(pod_at("a", "10"));
    assert!(cache.refresh(pod_at("a", "9")), "opaque: 9 may follow 10");
    assert_eq!(version_of(&cache, "a"), "9");
}

#[test]
fn an_update_reports_the_state_before_it() {
    let cache = ObjectCache::default();
    let Change::Applied { old: None, .. } = cache.apply(pod_at("a", "1")) else {
        panic!("first sight has no previous state");
    };
    let Change::Applied {
        old: Some(old),
        new,
    } = cache.apply(pod_at("a", "2"))
    else {
        panic!("an update has a previous state");
    };
    assert_eq!(old.resource_version.as_deref(), Some("1"));
    assert_eq!(new.resource_version.as_deref(), Some("2"));
}

#[test]
fn a_relist_swaps_the_content_and_reports_what_vanished() {
    let cache = ObjectCache::default();
    cache.apply(pod("a"));
    cache.apply(pod("b"));
    let fresh = HashMap::from([(pod("b").key(), pod("b")), (pod("c").key(), pod("c"))]);
    let changes = cache.replace(fresh);
    let deleted: Vec<_> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Deleted(o) => Some(o.name.as_str()),
            Change::Applied { .. } => None,
        })
        .collect();
    assert_eq!(deleted, ["a"]);
    assert_eq!(changes.len(), 3);
    assert!(cache.get(Some("ns"), "a").is_none());
    assert!(cache.get(Some("ns"), "c").is_some());
}

#[test]
fn a_count_by_namespace_counts_only_that_namespace() {
    let cache = ObjectCache::default();
    cache.apply(pod("a"));
    cache.apply(pod("b"));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "c", "namespace": "other", "resourceVersion": "7"},
    }))
    .expect("pod json");
    cache.apply(Arc::new(
        CachedObject::from_dynamic(obj).expect("serialise"),
    ));
    assert_eq!(cache.count_in(None), 3);
    assert_eq!(cache.count_in(Some("ns")), 2);
    assert_eq!(cache.count_in(Some("other")), 1);
    assert_eq!(cache.count_in(Some("none")), 0);
}

#[test]
fn a_small_cache_is_visited_in_place_and_a_large_one_is_left_to_a_snapshot() {
    let cache = ObjectCache::default();
    for name in ["a", "b", "c"] {
        cache.apply(pod(name));
    }
    let mut seen = Vec::new();
    assert!(cache.visit_if_small(Some("ns"), 3, |o| seen.push(o.name.clone())));
    seen.sort();
    assert_eq!(seen, ["a", "b", "c"]);
    let mut none = 0;
    assert!(cache.visit_if_small(Some("other"), 3, |_| none += 1));
    assert_eq!(none, 0);
    assert!(!cache.visit_if_small(None, 2, |_| panic!("over the limit: not visited")));
}
