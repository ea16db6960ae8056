//! Helpers on the contract's `error` record (the bindings already make it a
//! `std::error::Error`) and the `failure` a reconcile returns.

use crate::{Error, ErrorCode, Failure};

impl Error {
    /// An error with a code and message and nothing from the API server.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            status: None,
            retry_after_ms: None,
            causes: Vec::new(),
        }
    }

    /// An error of the open `other` code, for the plugin's own failures.
    pub fn other(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Other, message)
    }

    /// An `invalid` error: the input (an object's spec, say) is wrong.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Invalid, message)
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the object is missing: usually "it was deleted, nothing to do".
    pub fn is_not_found(&self) -> bool {
        self.code == ErrorCode::NotFound
    }

    /// Whether someone else changed the object or owns the fields: read again and
    /// retry.
    pub fn is_conflict(&self) -> bool {
        self.code == ErrorCode::Conflict
    }

    /// Whether a create found the name taken.
    pub fn is_already_exists(&self) -> bool {
        self.code == ErrorCode::AlreadyExists
    }

    /// Whether RBAC (or an admission rule, such as a namespace being deleted) refused
    /// the call: retrying at once will not help.
    pub fn is_forbidden(&self) -> bool {
        self.code == ErrorCode::Forbidden
    }

    /// This error as a terminal failure: the host records it and does not retry the
    /// key until something queues it again (controller-runtime's `TerminalError`).
    pub fn terminal(self) -> Failure {
        Failure::Terminal(self)
    }
}

impl std::fmt::Display for ErrorCode {
    /// As the contract spells it (`not-found`), in the host's words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use wcm_contract_words::ErrorCode as Word;
        f.write_str(
            match self {
                ErrorCode::NotFound => Word::NotFound,
                ErrorCode::AlreadyExists => Word::AlreadyExists,
                ErrorCode::Conflict => Word::Conflict,
                ErrorCode::Forbidden => Word::Forbidden,
                ErrorCode::Invalid => Word::Invalid,
                ErrorCode::Unavailable => Word::Unavailable,
                ErrorCode::Other => Word::Other,
            }
            .as_str(),
        )
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::invalid(format!("unexpected JSON from the host: {e}"))
    }
}

impl From<Error> for Failure {
    /// An error from a host call, retried with backoff.
    fn from(e: Error) -> Failure {
        Failure::Retry(e)
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure::Retry(e.into())
    }
}

impl Failure {
    /// The error, retried or not.
    pub fn error(&self) -> &Error {
        match self {
            Failure::Retry(e) | Failure::Terminal(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_well_and_convert_from_json_failures() {
        let e = Error::new(ErrorCode::NotFound, "get v1/Pod a/b: not in the cache");
        assert!(
            e.to_string().contains("get v1/Pod a/b: not in the cache"),
            "{e}"
        );
        assert!(e.is_not_found());
        let json: Error = serde_json::from_str::<u8>("x")
            .expect_err("bad json")
            .into();
        assert_eq!(json.code, ErrorCode::Invalid, "{json}");
        assert_eq!(Error::other("boom").message(), "boom");
    }

    #[test]
    fn host_errors_retry_and_terminal_ones_say_so() {
        let retried: Failure = Error::other("flaky").into();
        assert!(matches!(retried, Failure::Retry(_)));
        let terminal = Error::invalid("spec.replicas must be positive").terminal();
        assert!(matches!(&terminal, Failure::Terminal(e) if e.code == ErrorCode::Invalid));
        assert_eq!(terminal.error().message(), "spec.replicas must be positive");
    }
}
