//! Rules for the names, namespaces and kinds a plugin passes, checked before any of
//! them reaches a request URL, a log line or a cache lookup.
//!
//! kube-client puts a name into the request path as it is, after checking only that
//! it is not empty, so a name such as `victim?fieldManager=other&x=` would add query
//! parameters to the request. client-go's `Request.Name()` refuses names that are not
//! valid path segments; this module is stricter still: a name may hold only the
//! characters that need no escaping in a URL path, which covers every name the API
//! server accepts for the built-in kinds and for custom resources.

use crate::logs::shorten;

/// Longest object name Kubernetes accepts (a DNS subdomain).
pub const NAME_MAX: usize = 253;
/// Longest namespace, API version or DNS label.
pub const LABEL_MAX: usize = 63;

/// A name, namespace or kind the API server would refuse or that would change the
/// meaning of a request URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// An object name breaks the rules.
    #[error(
        "name {name:?} is not a valid object name: {reason} (a name is 1 to 253 \
         characters: letters, digits, '-', '.', '_', ':', '@' or '~', and not \".\" or \"..\")"
    )]
    Name {
        /// The name, shortened if very long.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A namespace is not a DNS-1123 label.
    #[error(
        "namespace {namespace:?} is not a valid namespace: it must be 1 to 63 lower-case \
         letters, digits or '-', starting and ending with a letter or digit"
    )]
    Namespace {
        /// The namespace, shortened if very long.
        namespace: String,
    },
    /// A group, version or kind is malformed.
    #[error("kind {group:?}/{version:?}/{kind:?} is not valid: {reason}")]
    Kind {
        /// The API group.
        group: String,
        /// The API version.
        version: String,
        /// The kind.
        kind: String,
        /// Which part is wrong.
        reason: &'static str,
    },
}

/// Checks an object name: a path segment that needs no escaping.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let err = |reason: String| NameError::Name {
        name: shorten(name),
        reason,
    };
    if name.is_empty() {
        return Err(err("it is empty".into()));
    }
    if name.len() > NAME_MAX {
        return Err(err(format!("it is {} bytes long", name.len())));
    }
    if name == "." || name == ".." {
        return Err(err("it is a relative path".into()));
    }
    match name.chars().find(|c| !is_name_char(*c)) {
        Some(c) => Err(err(format!("character {c:?} is not allowed"))),
        None => Ok(()),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '@' | '~')
}

/// Checks a namespace: a DNS-1123 label.
pub fn validate_namespace(namespace: &str) -> Result<(), NameError> {
    match is_dns_label(namespace) {
        true => Ok(()),
        false => Err(NameError::Namespace {
            namespace: shorten(namespace),
        }),
    }
}

/// Checks a group (empty for the core group, else a DNS subdomain), a version (a
/// DNS label) and a kind (a letter, then letters and digits, at most 63).
pub fn validate_kind(group: &str, version: &str, kind: &str) -> Result<(), NameError> {
    let err = |reason| NameError::Kind {
        group: shorten(group),
        version: shorten(version),
        kind: shorten(kind),
        reason,
    };
    if !group.is_empty() && !is_dns_subdomain(group) {
        return Err(err("the group must be empty (core) or a DNS subdomain"));
    }
    if !is_dns_label(version) {
        return Err(err("the version must be a DNS label such as v1"));
    }
    let starts_with_letter = kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let alphanumeric = kind.chars().all(|c| c.is_ascii_alphanumeric());
    if !starts_with_letter || !alphanumeric || kind.len() > LABEL_MAX {
        return Err(err(
            "the kind must be a letter followed by letters and digits, at most 63",
        ));
    }
    Ok(())
}

/// RFC 1123 label: lower-case alphanumeric or '-', alphanumeric at both ends, ≤ 63.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= LABEL_MAX
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= NAME_MAX && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_change_the_request_are_refused() {
        for (name, cause) in [
            ("victim?fieldManager=spoofed&x=", "'?'"),
            ("victim#x", "'#'"),
            ("a/b", "'/'"),
            ("a%2Fb", "'%'"),
            ("..", "relative path"),
            (".", "relative path"),
            ("", "empty"),
            ("two words", "' '"),
            ("line\nbreak", "'\\n'"),
            ("naïve", "'ï'"),
        ] {
            let err = validate_name(name).expect_err(name).to_string();
            assert!(err.contains(cause), "{name:?}: {err}");
        }
        let long = "a".repeat(300);
        let err = validate_name(&long)
            .expect_err("300 characters")
            .to_string();
        assert!(err.contains("300 bytes long"), "{err}");
        assert!(err.len() < 400, "the message shortens the name: {err}");
    }

    #[test]
    fn names_kubernetes_uses_are_accepted() {
        for name in [
            "web",
            "web-5d4f7.x",
            "system:controller:deployment-controller",
            "webapps.demo.wasm-controller-manager.io",
            "Mixed_Case@1~2",
            &"a".repeat(253),
        ] {
            assert_eq!(validate_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn namespaces_are_dns_labels() {
        assert_eq!(validate_namespace("kube-system"), Ok(()));
        for ns in ["", "Default", "a.b", "-a", "a-", "x?y", &"n".repeat(64)] {
            assert!(validate_namespace(ns).is_err(), "{ns:?}");
        }
    }

    #[test]
    fn kinds_are_checked_part_by_part() {
        assert_eq!(validate_kind("", "v1", "Pod"), Ok(()));
        assert_eq!(validate_kind("apps", "v1", "Deployment"), Ok(()));
        assert_eq!(
            validate_kind("demo.wasm-controller-manager.io", "v1alpha1", "WebApp"),
            Ok(())
        );
        for (g, v, k) in [
            ("apps/v1/namespaces", "v1", "Pod"),
            ("", "", "Pod"),
            ("", "v1?watch=1", "Pod"),
            ("", "v1", ""),
            ("", "v1", "Pod s"),
            ("", "v1", "1Pod"),
        ] {
            assert!(validate_kind(g, v, k).is_err(), "{g}/{v}/{k}");
        }
    }
}
