//! Compiling plugin components with bounded memory: large files one at a time, and the
//! compiler's freed memory given back to the operating system afterwards.
//!
//! Compiling a component costs far more memory than running it. Measured with the
//! debug host: the 18 MB Python example peaks at about 420 MiB of process memory while
//! it compiles (Cranelift works on many functions in parallel), the 12 MB JavaScript
//! one about as much, and both at once more than 750 MiB: over a 512 MiB container
//! limit, so the kubelet killed the host in a loop. Rust plugins (about 1 MB) cost
//! little. So files over [`LARGE_PLUGIN_BYTES`] take turns, while small ones compile at
//! once beside them (a small plugin never waits behind a large one).
//!
//! After a compilation glibc keeps most of the freed memory in its arenas: the host
//! stayed at 370 MiB after compiling the Python example, against 76 MiB when the same
//! plugin came from the compile cache. `malloc_trim` hands it back (164 MiB measured).

use tokio::sync::{Semaphore, SemaphorePermit};

/// Plugin files larger than this (4 MiB: every Python or JavaScript component, no
/// Rust one so far) compile one at a time.
pub const LARGE_PLUGIN_BYTES: usize = 4 << 20;

/// Admits compilations: one large file at a time, small ones freely.
#[derive(Debug)]
pub struct CompileTurns {
    large: Semaphore,
}

impl Default for CompileTurns {
    fn default() -> CompileTurns {
        CompileTurns {
            large: Semaphore::new(1),
        }
    }
}

impl CompileTurns {
    /// Waits for the turn to compile a file of `len` bytes; the turn ends when the
    /// returned permit is dropped. Small files need no turn.
    pub async fn turn(&self, len: usize) -> Option<SemaphorePermit<'_>> {
        if len <= LARGE_PLUGIN_BYTES {
            return None;
        }
        // The semaphore is never closed, so acquiring only fails if it were.
        self.large.acquire().await.ok()
    }
}

/// Returns the memory the allocator holds but no longer uses to the operating system.
/// glibc's `malloc_trim` has no safe wrapper in a maintained crate; it takes no
/// pointers and only releases free pages, so the call cannot break memory safety.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_freed_memory() {
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim(0) only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory by themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() {}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn small_files_never_wait_and_large_ones_take_turns() {
        let turns = Arc::new(CompileTurns::default());
        let first = turns.turn(LARGE_PLUGIN_BYTES + 1).await;
        assert!(first.is_some());
        // A small file compiles while a large one does.
        assert!(turns.turn(LARGE_PLUGIN_BYTES).await.is_none());
        // A second large file waits until the first is done.
        let waiting = {
            let turns = turns.clone();
            tokio::spawn(async move { turns.turn(18 << 20).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(first);
        assert!(waiting.await.expect("the waiting task ran"));
    }
}
