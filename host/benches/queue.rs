//! Work queue throughput with a no-op handler: adds per second and dispatches per
//! second, against a plain tokio channel doing the same hand-off in the same process.
//! Run with `make bench`; no cluster needed.
//!
//! Three workloads, each repeated and reported as the median over rounds:
//! - *distinct*: 100,000 different keys added, then drained by 4 workers;
//! - *hot keys*: 4 producers add 100,000 times over 100 keys while 4 workers drain,
//!   so most adds collapse into pending work (the channel cannot collapse anything);
//! - the channel baseline for *distinct* (send all, then 4 workers receive).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, mpsc};
use wcm_core::queue::{Backoff, WorkQueue};

const KEYS: u64 = 100_000;
const HOT_KEYS: u64 = 100;
const WORKERS: usize = 4;
const ROUNDS: usize = 9;

/// One round: time to add everything, time to dispatch everything, dispatch count.
struct Round {
    add: Duration,
    dispatch: Duration,
    dispatched: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let channel = rounds(channel_distinct).await;
    let queue = rounds(queue_distinct).await;
    let hot = rounds(queue_hot_keys).await;
    report("channel, distinct keys", &channel, None);
    report("work queue, distinct keys", &queue, Some(&channel));
    report("work queue, hot keys", &hot, Some(&channel));
}

async fn rounds<F, Fut>(workload: F) -> Vec<Round>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Round>,
{
    workload().await; // warm-up
    let mut out = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        out.push(workload().await);
    }
    out
}

async fn queue_distinct() -> Round {
    let queue = WorkQueue::new(Backoff::default());
    let start = Instant::now();
    for key in 0..KEYS {
        queue.add(key);
    }
    let add = start.elapsed();
    let start = Instant::now();
    let dispatched = drain(&queue, KEYS).await;
    Round {
        add,
        dispatch: start.elapsed(),
        dispatched,
    }
}

async fn queue_hot_keys() -> Round {
    let queue = WorkQueue::new(Backoff::default());
    let start = Instant::now();
    let producers: Vec<_> = (0..WORKERS as u64)
        .map(|p| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for i in 0..KEYS / WORKERS as u64 {
                    queue.add((i * 7 + p) % HOT_KEYS);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    let handled = Arc::new(AtomicU64::new(0));
    let workers = spawn_workers(&queue, handled.clone());
    for p in producers {
        p.await.expect("producer");
    }
    let add = start.elapsed();
    while !queue.is_empty() {
        tokio::task::yield_now().await;
    }
    queue.shut_down();
    for w in workers {
        w.await.expect("worker");
    }
    let dispatch = start.elapsed();
    Round {
        add,
        dispatch,
        dispatched: handled.load(Ordering::Relaxed),
    }
}

async fn channel_distinct() -> Round {
    let (tx, rx) = mpsc::unbounded_channel::<u64>();
    let start = Instant::now();
    for key in 0..KEYS {
        tx.send(key).expect("send");
    }
    let add = start.elapsed();
    drop(tx);
    let rx = Arc::new(Mutex::new(rx));
    let handled = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (rx, handled) = (rx.clone(), handled.clone());
            tokio::spawn(async move {
                while let Some(key) = rx.lock().await.recv().await {
                    std::hint::black_box(key);
                    handled.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    Round {
        add,
        dispatch: start.elapsed(),
        dispatched: handled.load(Ordering::Relaxed),
    }
}

/// Runs 4 no-op workers until `expected` keys were handled; returns the count.
async fn drain(queue: &WorkQueue<u64>, expected: u64) -> u64 {
    let handled = Arc::new(AtomicU64::new(0));
    let workers = spawn_workers(queue, handled.clone());
    while handled.load(Ordering::Relaxed) < expected {
        tokio::task::yield_now().await;
    }
    queue.shut_down();
    for w in workers {
        w.await.expect("worker");
    }
    handled.load(Ordering::Relaxed)
}

fn spawn_workers(
    queue: &WorkQueue<u64>,
    handled: Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..WORKERS)
        .map(|_| {
            let (queue, handled) = (queue.clone(), handled.clone());
            tokio::spawn(async move {
                while let Some(key) = queue.next().await {
                    std::hint::black_box(key);
                    handled.fetch_add(1, Ordering::Relaxed);
                    queue.done(&key);
                }
            })
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(name: &str, rounds: &[Round], baseline: Option<&[Round]>) {
    let adds = |r: &[Round]| {
        median(
            r.iter()
                .map(|r| KEYS as f64 / r.add.as_secs_f64())
                .collect(),
        )
    };
    let dispatches = |r: &[Round]| {
        median(
            r.iter()
                .map(|r| r.dispatched as f64 / r.dispatch.as_secs_f64())
                .collect(),
        )
    };
    let dispatched = median(rounds.iter().map(|r| r.dispatched as f64).collect());
    let ratio = baseline
        .map(|b| {
            format!(
                "   adds {:.2}× / dispatches {:.2}× the channel's",
                adds(rounds) / adds(b),
                dispatches(rounds) / dispatches(b)
            )
        })
        .unwrap_or_default();
    println!(
        "{name:27} adds/s {:>12.0}   dispatches/s {:>12.0}   dispatched {dispatched:>7.0} of {KEYS}{ratio}",
        adds(rounds),
        dispatches(rounds),
    );
}
