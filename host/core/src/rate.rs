//! A token bucket: the one rate limiter behind retries, API budgets, Event spam
//! filtering and log rates.
//!
//! Written here because each user needs it in a different shape: the queue and the
//! API budget *reserve* a token and wait for it (so waiters are served in order and
//! none starves), while the Event filter and the log limiter *try* and drop what does
//! not fit. Both are a few lines over the same arithmetic; a crate such as governor
//! offers the first shape only through its own clock and async waiting.

use std::time::Duration;

use tokio::time::Instant;

/// Tokens refill at `rate` per second up to `burst`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Tokens per second, in the long run.
    rate: f64,
    /// Tokens available after a long quiet time.
    burst: f64,
    /// Tokens available now; negative when future tokens are already reserved.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: f64, burst: u32) -> TokenBucket {
        TokenBucket {
            rate: rate.max(0.0),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            updated: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.updated = now;
    }

    /// Reserves one token; returns how long to wait until it exists (zero if it
    /// does now). A bucket with rate 0 never refills and never makes anyone wait.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 || self.rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-self.tokens / self.rate)
    }

    /// Takes one token if there is one now.
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reservations_beyond_the_burst_wait_in_turn() {
        let mut bucket = TokenBucket::new(10.0, 2);
        let now = Instant::now();
        assert_eq!(bucket.reserve(now), Duration::ZERO);
        assert_eq!(bucket.reserve(now), Duration::ZERO);
        assert_eq!(bucket.reserve(now), Duration::from_millis(100));
        assert_eq!(bucket.reserve(now), Duration::from_millis(200));
        assert_eq!(
            bucket.reserve(now + Duration::from_secs(10)),
            Duration::ZERO
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tries_drop_what_does_not_fit_and_refill_slowly() {
        // client-go's Event spam filter: burst 25, one more every 5 minutes.
        let mut bucket = TokenBucket::new(1.0 / 300.0, 25);
        let now = Instant::now();
        let taken = (0..2000).filter(|_| bucket.try_take(now)).count();
        assert_eq!(taken, 25);
        assert!(!bucket.try_take(now + Duration::from_secs(299)));
        assert!(bucket.try_take(now + Duration::from_secs(301)));
    }
}
