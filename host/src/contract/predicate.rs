//! The update predicates a plugin may put on a watch, parsed from the contract's strings.

use std::fmt;

/// Something that must hold between an object before and after an update for the
/// update to queue the object's key (controller-runtime's predicates of the same
/// names). Strings in the contract, so new ones do not change the watch type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Predicate {
    /// `metadata.generation` changed: the spec (or the deletion timestamp), not the status.
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

/// A predicate string this host does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown predicate {0:?} (this host knows generation-changed, labels-changed, \
     annotations-changed, finalizers-changed and deletion-started)"
)]
pub struct PredicateError(pub String);

impl Predicate {
    /// Every predicate.
    pub const ALL: [Predicate; 5] = [
        Predicate::GenerationChanged,
        Predicate::LabelsChanged,
        Predicate::AnnotationsChanged,
        Predicate::FinalizersChanged,
        Predicate::DeletionStarted,
    ];

    /// Parses a predicate as the contract spells it.
    pub fn parse(text: &str) -> Result<Predicate, PredicateError> {
        (Predicate::ALL.into_iter())
            .find(|p| p.to_string() == text)
            .ok_or_else(|| PredicateError(crate::logs::shorten(text)))
    }

    /// Parses every predicate of a watch, skipping unknown ones (validation at load
    /// is the one place that refuses them).
    pub fn parse_known(texts: &[String]) -> Vec<Predicate> {
        texts
            .iter()
            .filter_map(|t| Predicate::parse(t).ok())
            .collect()
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Predicate::GenerationChanged => "generation-changed",
            Predicate::LabelsChanged => "labels-changed",
            Predicate::AnnotationsChanged => "annotations-changed",
            Predicate::FinalizersChanged => "finalizers-changed",
            Predicate::DeletionStarted => "deletion-started",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_predicate_reads_back_and_unknown_ones_are_named() {
        for p in Predicate::ALL {
            assert_eq!(Predicate::parse(&p.to_string()), Ok(p));
        }
        let err = Predicate::parse("status-changed")
            .expect_err("unknown")
            .to_string();
        assert!(
            err.contains("unknown predicate \"status-changed\""),
            "{err}"
        );
        let known = Predicate::parse_known(&["labels-changed".into(), "nope".into()]);
        assert_eq!(known, vec![Predicate::LabelsChanged]);
    }
}
