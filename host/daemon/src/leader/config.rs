//! Leader-election settings, with kube-controller-manager's flag names and defaults.

use std::time::Duration;

/// client-go's jitter factor: retries wait up to 1.2 × the retry period, so the renew
/// deadline must leave room for that.
pub const JITTER_FACTOR: f64 = 1.2;

/// What a Lease decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ElectionMode {
    /// One Lease: its holder runs every plugin, the others stand by.
    #[default]
    Single,
    /// A Lease per plugin, spread over the live replicas: every replica works.
    PerPlugin,
}

/// How this replica takes part in the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// One Lease, or one per plugin.
    pub mode: ElectionMode,
    /// How long a lease is valid after its last renewal, as judged by standbys.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops acting.
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry_period: Duration,
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// This replica's identity in the Lease's `holderIdentity`.
    pub identity: String,
}

/// Why a set of election settings cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The leader could still be renewing after standbys consider the lease expired.
    #[error(
        "--leader-elect-renew-deadline ({renew:?}) must be shorter than \
         --leader-elect-lease-duration ({lease:?}), or two leaders could act at once"
    )]
    RenewNotBeforeExpiry {
        /// The renew deadline.
        renew: Duration,
        /// The lease duration.
        lease: Duration,
    },
    /// A jittered retry could overrun the renew deadline.
    #[error(
        "--leader-elect-retry-period ({retry:?}) × {JITTER_FACTOR} must be shorter than \
         --leader-elect-renew-deadline ({renew:?}), or a single slow retry loses the lease"
    )]
    RetryTooSlow {
        /// The retry period.
        retry: Duration,
        /// The renew deadline.
        renew: Duration,
    },
    /// An empty name, namespace or identity.
    #[error("leader election needs a non-empty {0}")]
    Empty(&'static str),
}

impl ElectionConfig {
    /// kube-controller-manager's timings (15 s / 10 s / 2 s) for `identity`, on the
    /// Lease `wcm-system/wasm-controller-manager` (where `rbac` grants the host it).
    pub fn new(identity: &str) -> ElectionConfig {
        ElectionConfig {
            mode: ElectionMode::Single,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lease_name: "wasm-controller-manager".into(),
            lease_namespace: "wcm-system".into(),
            identity: identity.into(),
        }
    }

    /// Rejects settings under which two replicas could act at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.renew_deadline >= self.lease_duration {
            return Err(ConfigError::RenewNotBeforeExpiry {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period.mul_f64(JITTER_FACTOR) >= self.renew_deadline {
            return Err(ConfigError::RetryTooSlow {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        for (what, value) in [
            ("lease name", &self.lease_name),
            ("lease namespace", &self.lease_namespace),
            ("identity", &self.identity),
        ] {
            if value.is_empty() {
                return Err(ConfigError::Empty(what));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_and_the_short_test_timings_are_valid() {
        assert_eq!(ElectionConfig::new("a").validate(), Ok(()));
        let short = ElectionConfig {
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_millis(2500),
            retry_period: Duration::from_millis(500),
            ..ElectionConfig::new("a")
        };
        assert_eq!(short.validate(), Ok(()));
    }

    #[test]
    fn unsafe_timings_are_rejected_with_the_flag_names() {
        let renew_too_long = ElectionConfig {
            renew_deadline: Duration::from_secs(15),
            ..ElectionConfig::new("a")
        };
        let err = renew_too_long.validate().expect_err("renew = lease");
        assert!(
            err.to_string().contains("--leader-elect-renew-deadline"),
            "{err}"
        );
        let retry_too_slow = ElectionConfig {
            retry_period: Duration::from_secs(9),
            ..ElectionConfig::new("a")
        };
        let err = retry_too_slow.validate().expect_err("9 s × 1.2 ≥ 10 s");
        assert!(
            err.to_string().contains("--leader-elect-retry-period"),
            "{err}"
        );
        let nameless = ElectionConfig::new("");
        assert_eq!(nameless.validate(), Err(ConfigError::Empty("identity")));
    }
}
