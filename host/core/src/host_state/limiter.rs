//! The memory and table limiter of one Store: all of an instance's linear memories and
//! tables together stay within the plugin's memory limit, and the Store keeps their
//! size, so a reused instance is retired once its memory has grown too far.
//!
//! wasmtime's [`StoreLimits`] bounds each memory on its own; a component may hold many
//! core instances, each with memories and tables of its own, so a per-memory bound let
//! one instance take that bound many times over. Here every memory's creation and
//! growth, and every table's, is counted against one total.

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// Bytes one table element is counted as: a function reference is a pointer.
pub const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// The bounds of one Store's instance, from the operator's limits.
#[derive(Debug, Clone, Copy)]
pub struct InstanceBounds {
    /// All linear memories and tables together, in bytes (`--max-memory-mib`).
    pub memory_bytes: usize,
    /// Elements of one table.
    pub table_elements: usize,
    /// Core instances one component may create.
    pub core_instances: usize,
    /// Memories one component may define.
    pub memories: usize,
    /// Tables one component may define.
    pub tables: usize,
}

/// Per-memory and count bounds (wasmtime's [`StoreLimits`], their messages unchanged),
/// plus the bytes the Store's memories and tables hold, bounded in total.
#[derive(Debug)]
pub struct InstanceLimits {
    limits: StoreLimits,
    max_total: usize,
    memory_bytes: usize,
    table_bytes: usize,
}

impl InstanceLimits {
    /// Limits enforcing `bounds`, with nothing allocated yet.
    pub fn new(bounds: InstanceBounds) -> InstanceLimits {
        let limits = StoreLimitsBuilder::new()
            .memory_size(bounds.memory_bytes)
            .table_elements(bounds.table_elements)
            .instances(bounds.core_instances)
            .memories(bounds.memories)
            .tables(bounds.tables)
            .trap_on_grow_failure(true)
            .build();
        InstanceLimits {
            limits,
            max_total: bounds.memory_bytes,
            memory_bytes: 0,
            table_bytes: 0,
        }
    }

    /// Linear memory of every instance in the Store, in bytes: the sum of each
    /// memory's size, as created and grown.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// Refuses a growth of `more` bytes that would take the total past the limit.
    fn admit(&self, more: usize, what: &str) -> wasmtime::Result<()> {
        let total = (self.memory_bytes + self.table_bytes).saturating_add(more);
        if total <= self.max_total {
            return Ok(());
        }
        // "growing memory" is how a call's failure is told to be a memory limit.
        wasmtime::bail!(
            "forcing trap when growing memory: {what} would take the instance's memories \
             and tables to {total} bytes in all, more than its limit of {}",
            self.max_total
        )
    }
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let more = desired.saturating_sub(current);
        self.admit(more, "a memory's growth")?;
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_bytes += more;
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
        let more = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        self.admit(more, "a table's growth")?;
        let allowed = self.limits.table_growing(current, desired, maximum)?;
        if allowed {
            self.table_bytes += more;
        }
        Ok(allowed)
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn limits() -> InstanceLimits {
        InstanceLimits::new(InstanceBounds {
            memory_bytes: 64 * MIB,
            table_elements: 1 << 20,
            core_instances: 8,
            memories: 4,
            tables: 4,
        })
    }

    #[test]
    fn memories_and_tables_are_bounded_together_not_each() {
        let mut l = limits();
        for _ in 0..3 {
            assert!(l.memory_growing(0, 20 * MIB, None).expect("within"));
        }
        assert_eq!(l.memory_bytes(), 60 * MIB);
        let e = l.memory_growing(0, 20 * MIB, None).expect_err("a fourth");
        assert!(e.to_string().contains("growing memory"), "{e}");
        assert!(
            e.to_string().contains("more than its limit of 67108864"),
            "{e}"
        );
        let elements = 4 * MIB / TABLE_ELEMENT_BYTES;
        assert!(l.table_growing(0, elements / 2, None).expect("half"));
        let e = l.table_growing(elements / 2, elements + 1, None);
        assert!(e.is_err(), "a table past what is left");
        assert_eq!(l.memory_bytes(), 60 * MIB, "nothing counted for refusals");
    }

    #[test]
    fn one_memory_is_still_bounded_on_its_own() {
        let mut l = limits();
        let e = l.memory_growing(0, 65 * MIB, None).expect_err("too large");
        assert!(e.to_string().contains("growing memory"), "{e}");
    }
}
