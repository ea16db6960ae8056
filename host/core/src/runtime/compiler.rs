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

use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Plugin files larger than this (4 MiB: every Python or JavaScript component, no
/// Rust one so far) compile one at a time.
pub const LARGE_PLUGIN_BYTES: usize = 4 << 20;

/// Admits compilations: one large file at a time, small ones freely; and runs them on
/// separate thread pools.
///
/// wasmtime compiles a component's functions in parallel on rayon's global pool. A
/// small plugin compiled there while a large one does queues its functions behind the
/// large one's: measured, pod-counter's 1 s compilation took 13 s beside the
/// JavaScript example's. Large files therefore compile on a pool of their own, and the
/// operating system shares the CPUs between the two.
#[derive(Debug)]
pub struct CompileTurns {
    large: Semaphore,
    large_pool: Option<rayon::ThreadPool>,
}

impl Default for CompileTurns {
    fn default() -> CompileTurns {
        let pool = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("wcm-compile-large-{i}"))
            .build();
        if let Err(e) = &pool {
            tracing::warn!(error = %e, "no thread pool for large plugins; they compile beside the others");
        }
        CompileTurns {
            large: Semaphore::new(1),
            large_pool: pool.ok(),
        }
    }
}

/// The right to compile one file, and how long it took to get it.
#[derive(Debug)]
pub struct Turn<'a> {
    /// Held while a large file compiles.
    permit: Option<SemaphorePermit<'a>>,
    /// Zero unless another large file was compiling.
    pub waited: Duration,
}

impl CompileTurns {
    /// Waits for the turn to compile a file of `len` bytes; the turn ends when the
    /// returned [`Turn`] is dropped. Small files need no turn.
    pub async fn turn(&self, len: usize) -> Turn<'_> {
        let mut turn = Turn {
            permit: None,
            waited: Duration::ZERO,
        };
        if len <= LARGE_PLUGIN_BYTES {
            return turn;
        }
        turn.permit = match self.large.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => {
                let asked = Instant::now();
                // The semaphore is never closed, so acquiring cannot fail.
                let permit = self.large.acquire().await.ok();
                turn.waited = asked.elapsed();
                permit
            }
        };
        turn
    }

    /// Runs `compile` (blocking) on the pool for files of `len` bytes.
    pub fn run<T: Send>(&self, len: usize, compile: impl FnOnce() -> T + Send) -> T {
        match &self.large_pool {
            Some(pool) if len > LARGE_PLUGIN_BYTES => pool.install(compile),
            _ => compile(),
        }
    }
}

/// [`release_freed_memory`] off the async threads (it walks the whole heap), when
/// freed memory should not wait for the allocator: a plugin parked, or the loads of a
/// start done (a thousand plugins read and linked at once leave their buffers' pages
/// free but held).
pub fn give_back_freed_memory() {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(release_freed_memory);
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
        assert!(first.permit.is_some() && first.waited.is_zero());
        // A small file compiles while a large one does.
        let small = turns.turn(LARGE_PLUGIN_BYTES).await;
        assert!(small.permit.is_none() && small.waited.is_zero());
        // A second large file waits until the first is done.
        let waiting = {
            let turns = turns.clone();
            tokio::spawn(async move {
                let turn = turns.turn(18 << 20).await;
                (turn.permit.is_some(), turn.waited)
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(first);
        let (admitted, waited) = waiting.await.expect("the waiting task ran");
        assert!(admitted && waited >= Duration::from_millis(50));
    }

    #[test]
    fn large_files_compile_on_their_own_pool() {
        let turns = CompileTurns::default();
        let on = |len| turns.run(len, || std::thread::current().name().map(str::to_string));
        let large = on(LARGE_PLUGIN_BYTES + 1).unwrap_or_default();
        assert!(large.starts_with("wcm-compile-large-"), "{large}");
        assert_ne!(on(1024), Some(large));
    }
}
