//! Waiting for a cluster state in tests: poll, never sleep a fixed time.

use std::time::Duration;

/// Calls `probe` every 200 ms until it returns `Some`, or `timeout` passes (`None`).
pub async fn poll_until<T, F, Fut>(timeout: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
