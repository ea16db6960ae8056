//! The verbs a plugin may declare on a kind (named once in `wcm_contract_words`), as
//! the host parses them and grants them in RBAC.

pub use wcm_contract_words::Verb;

/// A verb string this host does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown verb {0:?} (this host knows get, list, patch, apply, delete, patch/status, \
     patch/scale, create and update)"
)]
pub struct VerbError(pub String);

/// Parses a verb as the contract spells it (`patch-status`, 0.2's name of
/// `patch/status`, too); an unknown one is named, cut to size.
pub fn parse_verb(text: &str) -> Result<Verb, VerbError> {
    Verb::parse(text).ok_or_else(|| VerbError(crate::logs::shorten(text)))
}

/// The API verbs and subresource `verb` stands for in RBAC: server-side apply creates
/// as well as patches; a status patch patches the `status` subresource.
pub fn api_verbs(verb: Verb) -> (Option<&'static str>, &'static [&'static str]) {
    match verb {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_parse_as_spelled_and_print_back() {
        for verb in Verb::ALL {
            assert_eq!(parse_verb(&verb.to_string()), Ok(verb));
        }
        assert_eq!(parse_verb("patch-status"), Ok(Verb::PatchStatus));
    }

    #[test]
    fn unknown_verbs_are_named() {
        for bad in ["frobnicate", "get/status", "patch/", "Patch", ""] {
            let err = parse_verb(bad).expect_err(bad).to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
