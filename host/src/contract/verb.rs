//! The verbs a plugin may declare on a kind, parsed from the contract's strings.

use std::fmt;

/// One thing a plugin may do with a kind. Contract 0.3 spells verbs as strings
/// (`get`, `patch/status`) so that new verbs do not change the registration type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Read one object from the cache.
    Get,
    /// List objects from the cache.
    List,
    /// Patch labels (`patch-labels`).
    Patch,
    /// Server-side apply.
    Apply,
    /// Delete objects.
    Delete,
    /// Patch the status subresource (`patch-status`, `patch` of `status`).
    PatchStatus,
    /// Patch the scale subresource.
    PatchScale,
    /// Create objects.
    Create,
    /// Replace objects (`update`).
    Update,
}

/// A verb string this host does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown verb {0:?} (this host knows get, list, patch, apply, delete, patch/status, \
     patch/scale, create and update)"
)]
pub struct VerbError(pub String);

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 9] = [
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Apply,
        Verb::Delete,
        Verb::PatchStatus,
        Verb::PatchScale,
        Verb::Create,
        Verb::Update,
    ];

    /// Parses a verb as the contract spells it; `patch-status`, 0.2's name of
    /// `patch/status`, is accepted too.
    pub fn parse(text: &str) -> Result<Verb, VerbError> {
        match text {
            "patch-status" => Ok(Verb::PatchStatus),
            _ => (Verb::ALL.into_iter())
                .find(|v| v.to_string() == text)
                .ok_or_else(|| VerbError(crate::logs::shorten(text))),
        }
    }

    /// The API verbs and subresource this verb stands for in RBAC: server-side apply
    /// creates as well as patches; a status patch patches the `status` subresource.
    pub fn api_verbs(self) -> (Option<&'static str>, &'static [&'static str]) {
        match self {
            Verb::Get => (None, &["get"]),
            Verb::List => (None, &["list"]),
            Verb::Patch => (None, &["patch"]),
            Verb::Apply => (None, &["create", "patch"]),
            Verb::Delete => (None, &["delete"]),
            Verb::PatchStatus => (Some("status"), &["patch"]),
            Verb::PatchScale => (Some("scale"), &["patch"]),
            Verb::Create => (None, &["create"]),
            Verb::Update => (None, &["update"]),
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::PatchStatus => "patch/status",
            Verb::PatchScale => "patch/scale",
            Verb::Create => "create",
            Verb::Update => "update",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_parse_as_spelled_and_print_back() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(&verb.to_string()), Ok(verb));
        }
        assert_eq!(Verb::parse("patch-status"), Ok(Verb::PatchStatus));
    }

    #[test]
    fn unknown_verbs_are_named() {
        for bad in ["frobnicate", "get/status", "patch/", "Patch", ""] {
            let err = Verb::parse(bad).expect_err(bad).to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
