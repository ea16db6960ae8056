//! The update predicates a plugin may put on a watch (named once in
//! `wcm_contract_words`), as the host parses them.

pub use wcm_contract_words::Predicate;

/// A predicate string this host does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown predicate {0:?} (this host knows generation-changed, labels-changed, \
     annotations-changed, finalizers-changed and deletion-started)"
)]
pub struct PredicateError(pub String);

/// Parses a predicate as the contract spells it; an unknown one is named, cut to size.
pub fn parse_predicate(text: &str) -> Result<Predicate, PredicateError> {
    Predicate::parse(text).ok_or_else(|| PredicateError(crate::logs::shorten(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_predicate_reads_back_and_unknown_ones_are_named() {
        for p in Predicate::ALL {
            assert_eq!(parse_predicate(&p.to_string()), Ok(p));
        }
        let err = parse_predicate("status-changed")
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
