//! The wasmtime engine every plugin shares, and the epoch ticker behind deadlines.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::Limits;
use crate::host_state::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};

/// How often the engine's epoch advances; deadlines are whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Instances the pooling allocator keeps slots for: concurrent reconciles of all
/// plugins together. Slots hold no memory until used. One plugin holds at most one
/// instance per worker (`--max-concurrent-reconciles`) plus one for `register`, each of
/// at most the bounds of `runtime::state` (core instances, memories, tables), so no
/// plugin can take more than that share of the pool.
const POOLED_INSTANCES: u32 = 256;

/// What compiled code depends on: the component model and epoch interruption. The
/// compile worker builds its engine of this alone (no instance pool to reserve), and
/// its artifacts load in the daemon's engine, whose allocator changes nothing of the
/// code (wasmtime checks the two agree on every load).
pub fn compile_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config
}

/// Builds the engine: component model, async calls, epoch interruption, and the
/// pooling allocator unless disabled; compiling in this process (the tools: `rbac`,
/// `test`), it reuses and adds to the compiled functions in `functions` if given.
pub fn build_engine(limits: &Limits, functions: Option<&Path>) -> wasmtime::Result<Engine> {
    let mut config = compile_config();
    if let Some(dir) = functions
        && let Err(e) = super::functions::enable(&mut config, dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e,
            "compiling without the compiled functions of the compile cache");
    }
    if limits.pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOLED_INSTANCES);
        pool.max_core_instances_per_component(MAX_CORE_INSTANCES as u32);
        pool.max_memories_per_component(MAX_MEMORIES as u32);
        pool.max_tables_per_component(MAX_TABLES as u32);
        pool.total_core_instances(POOLED_INSTANCES * 8);
        pool.total_memories(POOLED_INSTANCES * 2);
        pool.total_tables(POOLED_INSTANCES * 4);
        pool.total_stacks(POOLED_INSTANCES);
        pool.max_memory_size(limits.max_memory_bytes);
        pool.linear_memory_keep_resident(limits.pool_keep_resident_bytes);
        pool.table_keep_resident(limits.pool_keep_resident_bytes);
        pool.pagemap_scan(match limits.pool_pagemap_scan {
            true => wasmtime::Enabled::Auto,
            false => wasmtime::Enabled::No,
        });
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own, so a
/// guest stuck in a loop is interrupted even when every async worker is busy; but
/// only while some guest call runs ([`EpochTicker::ticking`]). Deadlines and yields
/// matter only then, and an idle host woken 100 times a second spent ~3 ms of CPU
/// per second on nothing (a native controller spends none).
#[derive(Debug)]
pub struct EpochTicker {
    shared: Arc<Ticking>,
    thread: Option<JoinHandle<()>>,
}

/// What the ticker thread and the calls share: how many calls run, and whether to stop.
#[derive(Debug, Default)]
struct Ticking {
    state: Mutex<TickState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct TickState {
    calls: usize,
    stop: bool,
}

impl Ticking {
    fn lock(&self) -> MutexGuard<'_, TickState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps the epoch advancing while it lives: held for the length of one guest call.
#[derive(Debug)]
pub struct TickingCall {
    shared: Arc<Ticking>,
}

impl Drop for TickingCall {
    fn drop(&mut self) {
        self.shared.lock().calls -= 1;
    }
}

impl EpochTicker {
    /// Starts ticking `engine` while calls run.
    pub fn start(engine: Engine) -> EpochTicker {
        EpochTicker::with_tick(move || engine.increment_epoch())
    }

    /// Runs `tick` every [`EPOCH_TICK`] while calls run.
    fn with_tick(tick: impl Fn() + Send + 'static) -> EpochTicker {
        let shared = Arc::new(Ticking::default());
        let ticking = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                let mut state = ticking.lock();
                loop {
                    while state.calls == 0 && !state.stop {
                        state = ticking
                            .changed
                            .wait(state)
                            .unwrap_or_else(|p| p.into_inner());
                    }
                    if state.stop {
                        return;
                    }
                    drop(state);
                    std::thread::sleep(EPOCH_TICK);
                    tick();
                    state = ticking.lock();
                }
            })
            .ok();
        EpochTicker { shared, thread }
    }

    /// Keeps the epoch advancing until the returned guard is dropped.
    pub fn ticking(&self) -> TickingCall {
        self.shared.lock().calls += 1;
        self.shared.changed.notify_one();
        TickingCall {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting() -> (EpochTicker, Arc<AtomicUsize>) {
        let ticks = Arc::new(AtomicUsize::new(0));
        let counter = ticks.clone();
        let ticker = EpochTicker::with_tick(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (ticker, ticks)
    }

    /// Waits (up to 10 s) until `ticks` reaches `at_least`.
    fn until(ticks: &AtomicUsize, at_least: usize) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ticks.load(Ordering::SeqCst) < at_least {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(EPOCH_TICK);
        }
        true
    }

    #[test]
    fn the_epoch_advances_only_while_a_call_runs() {
        let (ticker, ticks) = counting();
        std::thread::sleep(EPOCH_TICK * 5);
        assert_eq!(ticks.load(Ordering::SeqCst), 0, "no call, no tick");

        let call = ticker.ticking();
        assert!(until(&ticks, 3), "a running call is ticked for");
        drop(call);
        // A tick already under way may still land; then none.
        std::thread::sleep(EPOCH_TICK * 3);
        let after = ticks.load(Ordering::SeqCst);
        std::thread::sleep(EPOCH_TICK * 5);
        assert_eq!(ticks.load(Ordering::SeqCst), after, "no call, no tick");

        let (first, second) = (ticker.ticking(), ticker.ticking());
        drop(first);
        assert!(
            until(&ticks, after + 2),
            "one call still running is ticked for"
        );
        drop(second);
    }

    #[test]
    fn dropping_the_ticker_stops_its_thread_while_idle_or_ticking() {
        let (idle, _) = counting();
        drop(idle);
        let (busy, ticks) = counting();
        let _call = busy.ticking();
        assert!(until(&ticks, 1));
        drop(busy);
    }
}
