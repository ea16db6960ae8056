//! A failed capability call, and how the API server's answers become the contract's
//! error: the case a plugin acts on, the HTTP status, retry-after and field causes.

use crate::contract::{Cause, ErrorCode, GuestError};

/// A failed capability call; the message names the operation, the object and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// The object does not exist in the cache or the cluster.
    #[error("not-found: {0}")]
    NotFound(String),
    /// Not declared by the plugin, or denied by the API server.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A write conflicted with someone else's.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Malformed input: label, selector, reason, unwatched kind.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The API server could not be reached or is overloaded.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The host failed at its own part of the call: never a plugin's answer, the
    /// import traps with a [`crate::host_state::HostFault`] instead.
    #[error("host fault: {0}")]
    HostFault(String),
    /// The API server answered with an error: its code, status and details kept.
    #[error("{0}")]
    Api(Box<GuestError>),
}

impl CapabilityError {
    /// The case a plugin acts on.
    pub fn code(&self) -> ErrorCode {
        match self {
            CapabilityError::NotFound(_) => ErrorCode::NotFound,
            CapabilityError::Forbidden(_) => ErrorCode::Forbidden,
            CapabilityError::Conflict(_) => ErrorCode::Conflict,
            CapabilityError::Invalid(_) => ErrorCode::Invalid,
            CapabilityError::Unavailable(_) => ErrorCode::Unavailable,
            CapabilityError::HostFault(_) => ErrorCode::Other,
            CapabilityError::Api(e) => e.code,
        }
    }
}

impl From<CapabilityError> for GuestError {
    fn from(e: CapabilityError) -> GuestError {
        let code = e.code();
        match e {
            CapabilityError::NotFound(m)
            | CapabilityError::Forbidden(m)
            | CapabilityError::Conflict(m)
            | CapabilityError::Invalid(m)
            | CapabilityError::Unavailable(m)
            | CapabilityError::HostFault(m) => GuestError::new(code, m),
            CapabilityError::Api(e) => *e,
        }
    }
}

/// Maps an API error to the case a plugin can act on, prefixed with what was
/// attempted, keeping the HTTP status, retry-after and causes of the server's Status.
pub(crate) fn from_kube(what: &str, e: &kube::Error) -> CapabilityError {
    let kube::Error::Api(status) = e else {
        return CapabilityError::Unavailable(format!("{what}: {e}"));
    };
    // The API server's own message says what was refused and why; the rest of the
    // Status (metadata) would only repeat it.
    let message = match status.message.is_empty() {
        false => format!(
            "{what}: {} ({} {})",
            status.message, status.code, status.reason
        ),
        true => format!("{what}: {} {}", status.code, status.reason),
    };
    let details = status.details.as_ref();
    let retry_after = details.map_or(0, |d| d.retry_after_seconds);
    CapabilityError::Api(Box::new(GuestError {
        code: code_of(status),
        message,
        status: Some(status.code),
        retry_after_ms: (retry_after > 0).then(|| u64::from(retry_after) * 1000),
        causes: details.map_or_else(Vec::new, |d| d.causes.iter().map(cause_of).collect()),
    }))
}

/// The case of an API server's Status, by reason first (as client-go's helpers do).
fn code_of(status: &kube::core::Status) -> ErrorCode {
    if status.is_already_exists() {
        return ErrorCode::AlreadyExists;
    }
    match status.code {
        404 => ErrorCode::NotFound,
        401 | 403 => ErrorCode::Forbidden,
        409 => ErrorCode::Conflict,
        400 | 422 => ErrorCode::Invalid,
        429 | 500..=599 => ErrorCode::Unavailable,
        _ => ErrorCode::Other,
    }
}

/// A Status cause; for an apply conflict (`conflict with "kubectl" using apps/v1`)
/// the manager's name is taken out of the message.
fn cause_of(c: &kube::core::response::StatusCause) -> Cause {
    let manager = (c.reason == "FieldManagerConflict")
        .then(|| manager_in(&c.message))
        .flatten();
    Cause {
        field: c.field.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        manager,
    }
}

/// The quoted manager of an apply conflict's message.
fn manager_in(message: &str) -> Option<String> {
    let rest = message.split_once("conflict with \"")?.1;
    Some(rest.split_once('"')?.0.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use kube::core::response::{StatusCause, StatusDetails};

    fn status(code: u16, reason: &str, details: Option<StatusDetails>) -> kube::Error {
        let mut s = Status::failure("refused", reason).with_code(code);
        s.details = details;
        kube::Error::Api(s.boxed())
    }

    #[test]
    fn an_api_error_keeps_its_code_status_retry_after_and_causes() {
        let details = StatusDetails {
            retry_after_seconds: 3,
            causes: vec![StatusCause {
                reason: "FieldManagerConflict".into(),
                message: "conflict with \"kubectl-edit\" using apps/v1".into(),
                field: ".spec.replicas".into(),
            }],
            ..serde_json::from_str("{}").expect("empty details")
        };
        let e: GuestError = from_kube(
            "apply apps/v1 Deployment a/b",
            &status(409, "Conflict", Some(details)),
        )
        .into();
        assert_eq!(e.code, ErrorCode::Conflict);
        assert_eq!(e.status, Some(409));
        assert_eq!(e.retry_after_ms, Some(3000));
        assert_eq!(e.causes[0].field, ".spec.replicas");
        assert_eq!(e.causes[0].manager.as_deref(), Some("kubectl-edit"));
        assert!(
            e.message
                .starts_with("apply apps/v1 Deployment a/b: refused (409 Conflict)"),
            "{}",
            e.message
        );
    }

    #[test]
    fn already_exists_is_told_apart_from_a_conflict() {
        let e = from_kube("create", &status(409, "AlreadyExists", None));
        assert_eq!(e.code(), ErrorCode::AlreadyExists);
        assert_eq!(
            from_kube("get", &status(404, "NotFound", None)).code(),
            ErrorCode::NotFound
        );
        assert_eq!(
            from_kube("x", &status(429, "TooManyRequests", None)).code(),
            ErrorCode::Unavailable
        );
    }
}
