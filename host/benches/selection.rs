//! A plugin's label selection over a cache, the way `list-first` and `count` make it
//! on every recount of a burst: in place under the cache's read lock (what the host
//! does for caches of up to 4,096 objects) against a snapshot of pointers matched
//! afterwards (what it did before, and still does for larger caches; what a kube-rs
//! controller does with its reflector store's `state()`). Run with `make bench`; no
//! cluster needed.
//!
//! Pod metadata as pod-counter's cache holds it, half of them marked counted; the
//! selection is pod-counter's (`!pod-counter.example.com/counted`), keeping the
//! matches; a count without a selector is the cache's length. Medians of rounds.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt};
use serde_json::json;
use wcm_core::kube::cache::{CachedObject, ObjectCache};

const SIZES: [usize; 3] = [500, 2_000, 4_000];
const SELECTIONS: usize = 200;
const ROUNDS: usize = 9;
const COUNTED: &str = "pod-counter.example.com/counted";

/// A cache of `n` Pods' metadata, every other one marked counted.
fn cache_of(n: usize) -> ObjectCache {
    let cache = ObjectCache::default();
    for i in 0..n {
        let mut labels = json!({"app": "burst", "pod-template-hash": "5d4f8c7b9"});
        if i % 2 == 0 {
            labels[COUNTED] = json!("true");
        }
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("burst-{i}"), "namespace": "bench",
                         "resourceVersion": format!("{}", 1000 + i), "labels": labels,
                         "uid": format!("0000-{i}")},
        }))
        .expect("pod json");
        cache.apply(Arc::new(
            CachedObject::from_dynamic(obj).expect("cacheable"),
        ));
    }
    cache
}

/// Time per selection of `select`, the median of rounds.
fn per_selection(mut select: impl FnMut() -> usize) -> Duration {
    let mut rounds: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let began = Instant::now();
            for _ in 0..SELECTIONS {
                black_box(select());
            }
            began.elapsed() / SELECTIONS as u32
        })
        .collect();
    rounds.sort();
    rounds[ROUNDS / 2]
}

fn main() {
    let selector: Selector =
        wcm_core::kube::selector::parse(&format!("!{COUNTED}")).expect("pod-counter's selector");
    println!("selection over a cache (median of {ROUNDS} rounds of {SELECTIONS})");
    println!(
        "{:>8} {:>14} {:>14} {:>7} {:>14} {:>14}",
        "objects", "snapshot µs", "in place µs", "ratio", "count snap µs", "count len µs"
    );
    for n in SIZES {
        let cache = cache_of(n);
        let snapshot = per_selection(|| {
            let all = cache.snapshot(Some("bench"));
            let kept: Vec<_> = all
                .iter()
                .filter(|o| selector.matches(&o.labels))
                .cloned()
                .collect();
            kept.len()
        });
        let in_place = per_selection(|| {
            let mut kept = Vec::new();
            cache.visit_if_small(Some("bench"), usize::MAX, |o| {
                if selector.matches(&o.labels) {
                    kept.push(o.clone())
                }
            });
            kept.len()
        });
        let count_snapshot = per_selection(|| cache.snapshot(None).len());
        let count_len = per_selection(|| cache.count_in(None));
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{n:>8} {:>14.1} {:>14.1} {:>6.2}× {:>14.1} {:>14.3}",
            us(snapshot),
            us(in_place),
            us(in_place) / us(snapshot),
            us(count_snapshot),
            us(count_len)
        );
    }
}
