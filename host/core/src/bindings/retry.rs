//! Instantiation tried again after a transient refusal by the operating system.
//!
//! The first instance of a component makes its copy-on-write memory image: a memfd
//! written and then sealed read-only. The kernel refuses the write seal with `EBUSY`
//! while it still holds a reference to one of the file's pages (it waits briefly, then
//! gives up), and `mmap` may answer `EAGAIN` or `ENOMEM` under a passing memory
//! squeeze. wasmtime does not keep the failure: the next instantiation builds the
//! image again. Without a retry here, one unlucky instantiation during `register`
//! failed the whole load, and the manager does not try a file again until it changes.

use std::time::Duration;

use futures::future::BoxFuture;

/// Attempts in all, the first included.
pub const ATTEMPTS: u32 = 4;

/// The pause before attempt `n + 1`: 10, 40, 160 ms.
fn pause(n: u32) -> Duration {
    Duration::from_millis(10 << (2 * n.saturating_sub(1)))
}

/// Whether `error` is the operating system's passing refusal, worth another try:
/// `EBUSY`, `EAGAIN`, `EINTR` or `ENOMEM` anywhere in its chain of causes.
pub fn is_transient(error: &wasmtime::Error) -> bool {
    const TRANSIENT: [i32; 4] = [libc::EBUSY, libc::EAGAIN, libc::EINTR, libc::ENOMEM];
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .filter_map(std::io::Error::raw_os_error)
        .any(|code| TRANSIENT.contains(&code))
}

/// Runs `instantiate` with `store` and `code` up to [`ATTEMPTS`] times while it fails
/// transiently; any other failure, or the last transient one, is returned as it is.
pub async fn instantiate<S, C, T>(
    store: &mut S,
    code: &C,
    mut instantiate: impl for<'a> FnMut(&'a mut S, &'a C) -> BoxFuture<'a, wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let mut attempt = 1;
    loop {
        match instantiate(store, code).await {
            Err(e) if attempt < ATTEMPTS && is_transient(&e) => {
                tracing::debug!(error = %e, attempt, "instantiation refused for now; trying again");
                tokio::time::sleep(pause(attempt)).await;
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error wasmtime gives when the kernel refuses the seal of a memory image.
    fn seal_refused() -> wasmtime::Error {
        let os = std::io::Error::from_raw_os_error(libc::EBUSY);
        wasmtime::Error::new(os).context("cannot add seals to the memfd")
    }

    /// Fails with `error()` on the first `fails` attempts (counted in the store).
    async fn run(
        fails: u32,
        error: fn() -> wasmtime::Error,
    ) -> (u32, wasmtime::Result<&'static str>) {
        let mut attempts = 0u32;
        let result = instantiate(&mut attempts, &(), |attempts, _| {
            Box::pin(async move {
                *attempts += 1;
                if *attempts <= fails {
                    Err(error())
                } else {
                    Ok("instance")
                }
            })
        })
        .await;
        (attempts, result)
    }

    #[tokio::test]
    async fn a_refused_memory_image_seal_is_tried_again() {
        let (attempts, result) = run(2, seal_refused).await;
        assert_eq!(
            result.expect("instantiated on the third attempt"),
            "instance"
        );
        assert_eq!(attempts, 3);
    }

    #[tokio::test]
    async fn a_refusal_that_lasts_ends_after_the_last_attempt_with_its_cause() {
        let (attempts, result) = run(u32::MAX, seal_refused).await;
        assert_eq!(attempts, ATTEMPTS);
        let text = format!("{:#}", result.expect_err("still refused"));
        assert!(text.contains("cannot add seals to the memfd"), "{text}");
        assert!(text.contains("os error 16"), "{text}");
    }

    #[tokio::test]
    async fn other_failures_are_not_tried_again() {
        let (attempts, result) = run(u32::MAX, || wasmtime::Error::msg("unknown import")).await;
        assert_eq!(attempts, 1);
        assert!(result.is_err());
        let denied = || wasmtime::Error::new(std::io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(run(u32::MAX, denied).await.0, 1);
    }

    #[test]
    fn pauses_grow_fourfold() {
        let pauses: Vec<_> = (1..ATTEMPTS).map(pause).collect();
        assert_eq!(pauses, [10, 40, 160].map(Duration::from_millis));
    }
}
