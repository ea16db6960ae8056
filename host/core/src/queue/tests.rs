//! Unit tests of the work queue contract, with paused time (no cluster).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::metrics::QueueMetrics;

use super::*;

fn queue() -> WorkQueue<String> {
    WorkQueue::new(Backoff::default())
}

#[tokio::test(start_paused = true)]
async fn many_adds_before_processing_are_processed_once() {
    let q = queue();
    for _ in 0..100 {
        q.add("a".to_string());
    }
    q.add("b".to_string());
    assert_eq!(q.next().await.as_deref(), Some("a"));
    assert_eq!(q.next().await.as_deref(), Some("b"));
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_add_while_processing_runs_once_more_afterwards() {
    let q = queue();
    q.add("a".to_string());
    let key = q.next().await.expect("key");
    q.add("a".to_string());
    q.add("a".to_string());
    assert!(
        q.is_empty(),
        "a key being processed must not be handed out again"
    );
    q.done(&key);
    assert_eq!(q.next().await.as_deref(), Some("a"));
    q.done(&key);
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_key_is_never_processed_by_two_workers_at_once() {
    let q = queue();
    let in_progress = Arc::new(Mutex::new(HashSet::new()));
    let (overlaps, processed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (q, busy) = (q.clone(), in_progress.clone());
        let (overlaps, processed) = (overlaps.clone(), processed.clone());
        workers.push(tokio::spawn(async move {
            while let Some(k) = q.next().await {
                if !busy.lock().expect("lock").insert(k.clone()) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                busy.lock().expect("lock").remove(&k);
                processed.fetch_add(1, Ordering::SeqCst);
                q.done(&k);
            }
        }));
    }
    // 10,000 adds of 20 keys in a pseudo-random order (a fixed LCG: reproducible).
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..10_000 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        q.add(format!("key-{}", (seed >> 33) % 20));
        if i % 4 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    q.shut_down();
    for w in workers {
        w.await.expect("worker");
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a key ran on two workers at once"
    );
    let n = processed.load(Ordering::SeqCst);
    assert!(n < 10_000, "adds were not collapsed: {n} reconciles");
    assert!(n >= 20, "every key must run: {n} reconciles");
}

#[test]
fn backoff_doubles_from_5ms_and_caps_at_1000s() {
    let b = Backoff::default();
    assert_eq!(b.delay(0), Duration::from_millis(5));
    assert_eq!(b.delay(1), Duration::from_millis(10));
    assert_eq!(b.delay(4), Duration::from_millis(80));
    assert_eq!(b.delay(40), Duration::from_secs(1000));
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_and_forget_resets() {
    let q = queue();
    assert_eq!(q.add_rate_limited("a".into()), Duration::from_millis(5));
    assert_eq!(q.add_rate_limited("a".into()), Duration::from_millis(10));
    assert_eq!(q.add_rate_limited("a".into()), Duration::from_millis(20));
    q.forget(&"a".to_string());
    assert_eq!(q.add_rate_limited("a".into()), Duration::from_millis(5));
}

#[tokio::test(start_paused = true)]
async fn a_recovered_plugins_failed_keys_run_at_once_with_their_backoff_forgotten() {
    let q = queue();
    q.add("a".to_string());
    let taken = q.next().await.expect("a");
    for _ in 0..20 {
        q.add_rate_limited(taken.clone()); // a backoff of minutes by now
    }
    q.done(&taken);
    q.add_after("b".to_string(), Duration::from_secs(60)); // a requeue, not a failure
    q.retry_failed_now();
    assert_eq!(q.len(), 1, "a is ready at once");
    assert_eq!(q.next().await.as_deref(), Some("a"));
    assert_eq!(q.delayed(), 1, "b still waits for its deadline");
    assert_eq!(
        q.add_rate_limited("a".into()),
        Duration::from_millis(5),
        "forgotten"
    );
}

#[tokio::test(start_paused = true)]
async fn add_after_waits_and_an_earlier_add_wins() {
    let q = queue();
    q.add_after("a".to_string(), Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert!(q.is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(q.next().await.as_deref(), Some("a"));

    q.add_after("b".to_string(), Duration::from_secs(60));
    q.add("b".to_string());
    assert_eq!(q.next().await.as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_intake_and_wakes_idle_workers() {
    let q = queue();
    let idle = {
        let q = q.clone();
        tokio::spawn(async move { q.next().await })
    };
    tokio::task::yield_now().await;
    q.add("a".to_string());
    let in_flight = idle.await.expect("worker").expect("key a");
    q.add("b".to_string());
    q.shut_down();
    q.add("c".to_string());
    assert_eq!(q.next().await, None, "no new work after shutdown");
    q.done(&in_flight); // the in-flight key still completes normally
    assert_eq!(q.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn closed_waits_for_shutdown_without_taking_a_workers_wake_up() {
    let q = queue();
    let watcher = {
        let q = q.clone();
        tokio::spawn(async move { q.closed().await })
    };
    let worker = {
        let q = q.clone();
        tokio::spawn(async move { q.next().await })
    };
    tokio::task::yield_now().await;
    q.add("a".to_string());
    let taken = tokio::time::timeout(Duration::from_secs(1), worker).await;
    assert_eq!(
        taken.expect("worker woken").expect("task").as_deref(),
        Some("a")
    );
    assert!(!watcher.is_finished(), "closed resolved before shutdown");
    q.shut_down();
    tokio::time::timeout(Duration::from_secs(1), watcher)
        .await
        .expect("closed resolves on shutdown")
        .expect("task");
    q.closed().await; // and at once afterwards
}

#[tokio::test(start_paused = true)]
async fn retries_beyond_the_burst_are_spread_at_the_overall_rate() {
    let q = WorkQueue::new(Backoff {
        retry_rate: 10.0,
        retry_burst: 100,
        ..Backoff::default()
    });
    // 100 different keys fail once each: the burst absorbs them at their own backoff.
    for i in 0..100 {
        assert_eq!(
            q.add_rate_limited(format!("k{i}")),
            Duration::from_millis(5)
        );
    }
    // The next ones wait for refilled tokens: 100 ms apart at 10 per second.
    assert_eq!(
        q.add_rate_limited("k100".into()),
        Duration::from_millis(100)
    );
    assert_eq!(
        q.add_rate_limited("k101".into()),
        Duration::from_millis(200)
    );
    // Time refills the bucket.
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(q.add_rate_limited("k102".into()), Duration::from_millis(5));
}

#[tokio::test(start_paused = true)]
async fn a_pending_delayed_add_does_not_keep_a_dropped_queue_alive() {
    let q = queue();
    q.add_after("a".to_string(), Duration::from_secs(1000));
    let inner = Arc::downgrade(&q.inner);
    drop(q);
    tokio::task::yield_now().await;
    assert!(inner.upgrade().is_none(), "the timer keeps the queue alive");
}

#[tokio::test(start_paused = true)]
async fn a_key_requeued_many_times_waits_once_at_its_earliest_deadline() {
    let metrics = QueueMetrics::detached();
    let depth = metrics.depth.clone();
    let q = WorkQueue::with_metrics(Backoff::default(), metrics);
    for _ in 0..1000 {
        q.add_after("busy".to_string(), Duration::from_secs(3600));
    }
    q.add_after("busy".to_string(), Duration::from_secs(60));
    q.add_after("busy".to_string(), Duration::from_secs(7200));
    assert_eq!(q.delayed(), 1, "one pending entry per key");
    assert_eq!(depth.get(), 1, "the depth gauge counts delayed keys");
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(q.len(), 1, "due at the earliest deadline");
    assert_eq!(q.delayed(), 0);
    let key = q.next().await.expect("key");
    assert_eq!(depth.get(), 0, "the gauge follows keys taken");
    q.done(&key);
    tokio::time::sleep(Duration::from_secs(7200)).await;
    assert!(q.is_empty(), "the replaced deadlines never fire");
}

#[tokio::test(start_paused = true)]
async fn an_add_replaces_a_pending_deadline() {
    let q = queue();
    for _ in 0..100 {
        q.add_after("a".to_string(), Duration::from_secs(3600));
    }
    q.add("a".to_string());
    assert_eq!(q.delayed(), 0);
    let key = q.next().await.expect("key");
    q.done(&key);
    tokio::time::sleep(Duration::from_secs(3601)).await;
    assert!(
        q.is_empty(),
        "the hour-long requeues must not fire after the add ran"
    );
}

#[tokio::test(start_paused = true)]
async fn a_delay_beyond_the_clock_is_accepted_and_never_fires_soon() {
    let q = queue();
    q.add_after("a".to_string(), Duration::from_millis(u64::MAX));
    q.add_after("b".to_string(), Duration::MAX);
    assert_eq!(q.delayed(), 2);
    tokio::time::sleep(Duration::from_secs(30 * 24 * 3600)).await;
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_drops_delayed_keys() {
    let q = WorkQueue::with_metrics(Backoff::default(), QueueMetrics::detached());
    q.add_after("a".to_string(), Duration::from_secs(1));
    q.shut_down();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(q.next().await, None);
    assert_eq!(q.delayed(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_queue_keeps_client_gos_series() {
    let m = QueueMetrics::detached();
    let q = WorkQueue::with_metrics(Backoff::default(), m.clone());
    q.add("a".to_string());
    q.add("a".to_string());
    q.add("b".to_string());
    assert_eq!(m.adds.get(), 2, "a repeat of a pending key is not an add");
    tokio::time::advance(Duration::from_secs(2)).await;
    let a = q.next().await.expect("a");
    tokio::time::advance(Duration::from_secs(3)).await;
    q.refresh_work_gauges();
    assert_eq!(m.longest.get(), 3.0);
    assert_eq!(m.unfinished.get(), 3.0);
    q.done(&a);
    assert_eq!(m.longest.get(), 0.0);
    q.add_rate_limited("b".to_string());
    assert_eq!(m.retries.get(), 1);
    let text = {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("queue", "q", m.queue_duration.clone());
        registry.register("work", "w", m.work_duration.clone());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    };
    assert!(
        text.contains("queue_count 1") && text.contains("queue_sum 2.0"),
        "{text}"
    );
    assert!(
        text.contains("work_count 1") && text.contains("work_sum 3.0"),
        "{text}"
    );
}
