//! A failed host call or reconcile as the contract reports it: a code to act on, a
//! message, and what the API server added (HTTP status, retry-after, field causes).

use std::fmt;

pub use wcm_contract_words::ErrorCode;

/// One reason behind an error, from the API server's `Status` details.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cause {
    /// The field concerned (empty when none).
    pub field: String,
    /// Machine-readable reason.
    pub reason: String,
    /// What is wrong.
    pub message: String,
    /// For an apply conflict: the manager owning the field.
    pub manager: Option<String>,
}

/// An error crossing the contract, either way: what a host call returns to the plugin,
/// or what a plugin's reconcile returned to the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuestError {
    /// The case.
    pub code: ErrorCode,
    /// Names the call, the object and the cause.
    pub message: String,
    /// The API server's HTTP status, if a call was made.
    pub status: Option<u16>,
    /// How long the API server asked to wait, in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// Field-level causes.
    pub causes: Vec<Cause>,
}

impl GuestError {
    /// An error with a code and message only (no API call behind it).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> GuestError {
        GuestError {
            code,
            message: message.into(),
            status: None,
            retry_after_ms: None,
            causes: Vec::new(),
        }
    }

    /// The same error with its message and causes cut to log-line size and their
    /// control characters escaped: a plugin's text ends up in the host's log, where a
    /// newline would start a line the plugin wrote to look like the host's.
    pub fn capped(mut self, max_bytes: usize) -> GuestError {
        const MAX_CAUSES: usize = 16;
        let cut = |m: &str| crate::logs::escape_cut(m, max_bytes).0;
        self.message = cut(&self.message);
        self.causes.truncate(MAX_CAUSES);
        for c in &mut self.causes {
            c.field = cut(&c.field);
            c.reason = cut(&c.reason);
            c.message = cut(&c.message);
            c.manager = c.manager.as_deref().map(cut);
        }
        self
    }
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for GuestError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_error_is_one_escaped_line_of_bounded_size() {
        let forged = "failed\n2026-12-05T00:00:00Z  INFO wcm_daemon: became leader";
        let huge = format!("{forged}{}", "\u{7}".repeat(10 << 20));
        let mut error = GuestError::new(ErrorCode::Other, huge);
        error.causes = vec![
            Cause {
                field: "spec\nx".into(),
                reason: String::new(),
                message: String::new(),
                manager: None,
            };
            100
        ];
        let capped = error.capped(4096);
        assert!(
            capped.message.starts_with("failed\\n2026"),
            "{}",
            &capped.message[..40]
        );
        assert!(!capped.to_string().chars().any(char::is_control));
        assert!(capped.message.len() < 4096 + 64, "{}", capped.message.len());
        assert_eq!(capped.causes.len(), 16);
        assert_eq!(capped.causes[0].field, "spec\\nx");
    }
}
