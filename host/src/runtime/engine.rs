//! The wasmtime engine every plugin shares, and the epoch ticker behind deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::Limits;

/// How often the engine's epoch advances; deadlines are whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Instances the pooling allocator keeps slots for: concurrent reconciles of all
/// plugins together. Slots hold no memory until used.
const POOLED_INSTANCES: u32 = 256;

/// Builds the engine: component model, async calls, epoch interruption, and the
/// pooling allocator unless disabled.
pub fn build_engine(limits: &Limits) -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    if limits.pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOLED_INSTANCES);
        pool.total_core_instances(POOLED_INSTANCES * 8);
        pool.total_memories(POOLED_INSTANCES * 2);
        pool.total_tables(POOLED_INSTANCES * 4);
        pool.total_stacks(POOLED_INSTANCES);
        pool.max_memory_size(limits.max_memory_bytes);
        pool.linear_memory_keep_resident(limits.pool_keep_resident_bytes);
        pool.table_keep_resident(limits.pool_keep_resident_bytes);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own, so a
/// guest stuck in a loop is interrupted even when every async worker is busy.
#[derive(Debug)]
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .ok();
        EpochTicker { stop, thread }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
