//! Kubernetes label key and value rules, checked before any API call is made.
//!
//! The rules are those of `k8s.io/apimachinery/pkg/util/validation`: a key is an
//! optional DNS-subdomain prefix and a slash, then a name of at most 63 characters;
//! a value is empty or a name-like string of at most 63 characters.

use super::names::is_dns_subdomain;
use crate::logs::shorten;

/// A label key or value that Kubernetes would reject, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The key breaks the qualified-name rules (the key shortened, as all input
    /// quoted in errors: it may be hostile and huge).
    #[error("invalid label key {key:?}: {reason}")]
    Key {
        /// The offending key.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The value breaks the label-value rules.
    #[error("invalid value {value:?} for label {key:?}: {reason}")]
    Value {
        /// The label the value was meant for.
        key: String,
        /// The offending value.
        value: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
}

const NAME_MAX: usize = 63;
const NAME_RULE: &str = "must be at most 63 characters, alphanumeric, '-', '_' or '.', \
                         and start and end with an alphanumeric character";

/// Checks a label key: `[prefix/]name`.
pub fn validate_key(key: &str) -> Result<(), LabelError> {
    let err = |reason| LabelError::Key {
        key: shorten(key),
        reason,
    };
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if !is_name(name) {
        return Err(err(NAME_RULE));
    }
    match prefix {
        Some(p) if !is_dns_subdomain(p) => Err(err(
            "prefix must be a DNS subdomain: at most 253 characters, lower-case alphanumeric, '-' or '.'",
        )),
        _ => Ok(()),
    }
}

/// Checks a label value for `key`.
pub fn validate_value(key: &str, value: &str) -> Result<(), LabelError> {
    if value.is_empty() || is_name(value) {
        return Ok(());
    }
    Err(LabelError::Value {
        key: shorten(key),
        value: shorten(value),
        reason: "must be empty or at most 63 characters, alphanumeric, '-', '_' or '.', \
                 and start and end with an alphanumeric character",
    })
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    s.len() <= NAME_MAX
        && first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_keys_kubernetes_accepts() {
        for key in [
            "app",
            "a",
            "pod-counter.example.com/count",
            "node-role.kubernetes.io/control-plane",
            "A_b.C-9",
        ] {
            assert_eq!(validate_key(key), Ok(()), "{key}");
        }
    }

    #[test]
    fn rejects_bad_keys_with_the_reason() {
        let long = "x".repeat(64);
        for key in ["", "-a", "a-", "a b", "Upper.Case/x", "a//b", "/x", &long] {
            let err = validate_key(key).expect_err(key);
            assert!(err.to_string().contains("invalid label key"), "{err}");
        }
        let err = validate_key("Example.com/x").expect_err("upper-case prefix");
        assert!(err.to_string().contains("DNS subdomain"), "{err}");
    }

    #[test]
    fn values_may_be_empty_but_not_malformed() {
        assert_eq!(validate_value("k", ""), Ok(()));
        assert_eq!(validate_value("k", "25"), Ok(()));
        let err = validate_value("k", "two words").expect_err("space");
        assert!(err.to_string().contains("\"two words\""), "{err}");
        assert!(validate_value("k", &"9".repeat(64)).is_err());
    }
}
