//! Helpers on the contract's `error` (the bindings already make it a `std::error::Error`).

use crate::Error;

impl Error {
    /// The message, whatever the case.
    pub fn message(&self) -> &str {
        match self {
            Error::NotFound(m)
            | Error::Forbidden(m)
            | Error::Conflict(m)
            | Error::Invalid(m)
            | Error::Unavailable(m)
            | Error::Other(m) => m,
        }
    }

    /// An error of the open `other` case, for the plugin's own failures.
    pub fn other(message: impl Into<String>) -> Error {
        Error::Other(message.into())
    }

    /// Whether the object is missing: usually "it was deleted, nothing to do".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }

    /// Whether RBAC (or an admission rule, such as a namespace being deleted) refused
    /// the call: retrying at once will not help.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Error::Forbidden(_))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Invalid(format!("unexpected JSON from the host: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_well_and_convert_from_json_failures() {
        let e = Error::NotFound("get v1/Pod a/b: not in the cache".into());
        assert!(
            e.to_string().contains("get v1/Pod a/b: not in the cache"),
            "{e}"
        );
        assert!(e.is_not_found());
        let json: Error = serde_json::from_str::<u8>("x")
            .expect_err("bad json")
            .into();
        assert!(matches!(json, Error::Invalid(_)), "{json}");
        assert_eq!(Error::other("boom").message(), "boom");
    }
}
