//! The memory and table limiter of one Store, which also keeps the instance's linear
//! memory size: a reused instance is retired once its memory has grown too far.

use wasmtime::{ResourceLimiter, StoreLimits};

/// wasmtime's [`StoreLimits`] (the bounds and their trap messages, unchanged), plus the
/// bytes of linear memory the Store's instances hold.
#[derive(Debug)]
pub struct InstanceLimits {
    limits: StoreLimits,
    memory_bytes: usize,
}

impl InstanceLimits {
    /// Limits enforced by `limits`, with no memory yet.
    pub fn new(limits: StoreLimits) -> InstanceLimits {
        InstanceLimits {
            limits,
            memory_bytes: 0,
        }
    }

    /// Linear memory of every instance in the Store, in bytes: the sum of each
    /// memory's size, as created and grown.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_bytes += desired.saturating_sub(current);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}
