//! The words of the contract that are strings or enum cases in `wit/` — the error
//! codes a plugin acts on, the verbs it may declare on a kind, the predicates it may
//! put on a watch — named and spelled once, for the host and the Rust SDK alike, so
//! the two cannot spell them differently. No dependencies: it builds for the host
//! and for `wasm32-wasip2`, and `wasm-controller-manager new` copies it beside the
//! SDK into a project.

use std::fmt;

/// The case a plugin acts on when a host call fails (the contract's `error-code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// The object does not exist (or is not in the cache yet).
    NotFound,
    /// A create found the name taken.
    AlreadyExists,
    /// A precondition failed, or another field manager owns the fields.
    Conflict,
    /// Not declared by the plugin, or denied by the API server.
    Forbidden,
    /// Malformed input, or refused by validation.
    Invalid,
    /// Not reachable, not ready, or throttled: retrying later may help.
    Unavailable,
    /// Anything else.
    Other,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 7] = [
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::Conflict,
        ErrorCode::Forbidden,
        ErrorCode::Invalid,
        ErrorCode::Unavailable,
        ErrorCode::Other,
    ];

    /// The code as the contract spells it (`not-found`), for logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not-found",
            ErrorCode::AlreadyExists => "already-exists",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Invalid => "invalid",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Other => "other",
        }
    }
}

/// One thing a plugin may do with a kind beyond reading what it watches. The
/// contract spells verbs as strings (`get`, `patch/status`) so that new verbs do not
/// change the registration type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Read one object (`get`), from the cache or, for a kind not watched, live.
    Get,
    /// List objects from the cache (`list`).
    List,
    /// Change labels, finalizers, or anything by a patch (`patch-labels`,
    /// `patch-finalizers`, `patch`).
    Patch,
    /// Create or update whole objects by server-side apply (`apply`).
    Apply,
    /// Delete objects (`delete`).
    Delete,
    /// Write the status subresource (`patch-status`, `patch` of `status`).
    PatchStatus,
    /// Patch the scale subresource.
    PatchScale,
    /// Create objects (`create`).
    Create,
    /// Replace objects read earlier (`update`).
    Update,
}

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

    /// The verb as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::PatchStatus => "patch/status",
            Verb::PatchScale => "patch/scale",
            Verb::Create => "create",
            Verb::Update => "update",
        }
    }

    /// The verb `text` spells, if it is one; `patch-status`, contract 0.2's name of
    /// `patch/status`, is one too.
    pub fn parse(text: &str) -> Option<Verb> {
        match text {
            "patch-status" => Some(Verb::PatchStatus),
            _ => Verb::ALL.into_iter().find(|v| v.as_str() == text),
        }
    }
}

/// Something that must hold between an object before and after an update for the
/// update to queue the object's key (controller-runtime's predicates of the same
/// names). Strings in the contract, so new ones do not change the watch type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Predicate {
    /// `metadata.generation` changed: the spec (or the deletion timestamp), not the
    /// status; kinds without a generation, such as ConfigMap, then queue on no update.
    GenerationChanged,
    /// The labels changed.
    LabelsChanged,
    /// The annotations changed.
    AnnotationsChanged,
    /// The finalizers changed.
    FinalizersChanged,
    /// The deletion timestamp was set.
    DeletionStarted,
}

impl Predicate {
    /// Every predicate.
    pub const ALL: [Predicate; 5] = [
        Predicate::GenerationChanged,
        Predicate::LabelsChanged,
        Predicate::AnnotationsChanged,
        Predicate::FinalizersChanged,
        Predicate::DeletionStarted,
    ];

    /// The predicate as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Predicate::GenerationChanged => "generation-changed",
            Predicate::LabelsChanged => "labels-changed",
            Predicate::AnnotationsChanged => "annotations-changed",
            Predicate::FinalizersChanged => "finalizers-changed",
            Predicate::DeletionStarted => "deletion-started",
        }
    }

    /// The predicate `text` spells, if it is one.
    pub fn parse(text: &str) -> Option<Predicate> {
        Predicate::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// Every known predicate of a watch, unknown ones skipped (the host refuses them
    /// when it checks the registration).
    pub fn parse_known(texts: &[String]) -> Vec<Predicate> {
        texts.iter().filter_map(|t| Predicate::parse(t)).collect()
    }
}

macro_rules! display_as_spelled {
    ($($word:ty),*) => {$(
        impl fmt::Display for $word {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

display_as_spelled!(ErrorCode, Verb, Predicate);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_spelled() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
        }
        assert_eq!(Verb::parse("patch-status"), Some(Verb::PatchStatus));
        for predicate in Predicate::ALL {
            assert_eq!(Predicate::parse(&predicate.to_string()), Some(predicate));
        }
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes.len(), 7);
        assert!(codes.contains(&"already-exists"));
    }

    #[test]
    fn unknown_words_are_none() {
        for bad in ["frobnicate", "get/status", "patch/", "Patch", ""] {
            assert_eq!(Verb::parse(bad), None, "{bad}");
        }
        let known = Predicate::parse_known(&["labels-changed".into(), "nope".into()]);
        assert_eq!(known, vec![Predicate::LabelsChanged]);
    }
}
