//! Parses Kubernetes label selector strings (`a=b,c!=d,e in (f,g),!h`) into kube's
//! [`Selector`], so the informer cache can answer `list` calls with a selector.
//!
//! Written here because kube-core can match a `Selector` but has no parser for the
//! string form that plugins (and `kubectl -l`) use.

use std::collections::BTreeSet;

use kube::core::{Expression, Selector};

use super::labels::validate_key;

/// Most requirements in one selector: each is checked against every object a `list`
/// or `count` reads, so their number bounds the work per object.
pub const MAX_TERMS: usize = 32;

/// A selector string the API server would reject, or one with too many requirements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    /// The selector as given, shortened.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a selector; the empty string selects everything.
pub fn parse(selector: &str) -> Result<Selector, SelectorError> {
    let err = |reason: String| SelectorError {
        selector: crate::logs::shorten(selector),
        reason,
    };
    let terms = split_terms(selector);
    if terms.len() > MAX_TERMS {
        return Err(err(format!(
            "{} requirements, more than {MAX_TERMS}",
            terms.len()
        )));
    }
    let mut exprs = Vec::new();
    for term in terms {
        let term = term.trim();
        if term.is_empty() {
            if selector.trim().is_empty() {
                continue;
            }
            return Err(err("empty requirement".into()));
        }
        exprs.push(parse_term(term).map_err(err)?);
    }
    Ok(exprs.into_iter().collect())
}

/// `selector` written one way — requirements sorted and once each, `==` as `=`, a
/// set's values sorted, spaces only around `in` and `notin` — so that two watches whose
/// selectors say the same thing differently share one informer. For a selector that
/// parses.
pub fn canonical(selector: &str) -> String {
    let mut terms: Vec<String> = (split_terms(selector).into_iter())
        .map(|t| canonical_term(t.trim()))
        .filter(|t| !t.is_empty())
        .collect();
    terms.sort();
    terms.dedup();
    terms.join(",")
}

fn canonical_term(term: &str) -> String {
    if let Some(key) = term.strip_prefix('!') {
        return format!("!{}", key.trim());
    }
    for (op, written) in [("!=", "!="), ("==", "="), ("=", "=")] {
        if let Some((k, v)) = term.split_once(op) {
            return format!("{}{written}{}", k.trim(), v.trim());
        }
    }
    for op in [" notin ", " in "] {
        if let Some((k, set)) = term.split_once(op) {
            let inner = set.trim().trim_start_matches('(').trim_end_matches(')');
            let mut values: Vec<&str> = inner.split(',').map(str::trim).collect();
            values.sort_unstable();
            values.dedup();
            return format!("{} {} ({})", k.trim(), op.trim(), values.join(","));
        }
    }
    term.to_string()
}

/// Splits on commas that are not inside a `(...)` value set.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_term(term: &str) -> Result<Expression, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key_of(key)?));
    }
    for (op, make) in [
        (
            "!=",
            Expression::NotEqual as fn(String, String) -> Expression,
        ),
        ("==", Expression::Equal),
        ("=", Expression::Equal),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            return Ok(make(key_of(k)?, value_of(k, v)?));
        }
    }
    for (op, make) in [
        (
            " notin ",
            Expression::NotIn as fn(String, BTreeSet<String>) -> Expression,
        ),
        (" in ", Expression::In),
    ] {
        if let Some((k, set)) = term.split_once(op) {
            return Ok(make(key_of(k)?, value_set(k, set)?));
        }
    }
    Ok(Expression::Exists(key_of(term)?))
}

fn key_of(k: &str) -> Result<String, String> {
    let k = k.trim();
    validate_key(k).map_err(|e| e.to_string())?;
    Ok(k.to_string())
}

fn value_of(key: &str, v: &str) -> Result<String, String> {
    let v = v.trim();
    super::labels::validate_value(key.trim(), v).map_err(|e| e.to_string())?;
    Ok(v.to_string())
}

fn value_set(key: &str, set: &str) -> Result<BTreeSet<String>, String> {
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("values for {:?} must be in parentheses", key.trim()))?;
    inner.split(',').map(|v| value_of(key, v)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::SelectorExt;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_matches_like_the_api_server() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("node-role.kubernetes.io/master", ""),
        ]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("tier notin (front)", false),
            ("node-role.kubernetes.io/master", true),
            ("!node-role.kubernetes.io/control-plane", true),
            ("app=web,tier in (back,front)", true),
            ("app=web,missing", false),
        ] {
            let parsed = parse(sel).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parsed.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn selectors_that_say_the_same_are_written_the_same() {
        let one = canonical("tier in (front, back),app==web, app=web");
        assert_eq!(one, "app=web,tier in (back,front)");
        assert_eq!(canonical(" app = web , tier in (back,front) "), one);
        assert_eq!(canonical("!a,b!=c,d notin (y, x)"), "!a,b!=c,d notin (x,y)");
        for selector in [one.as_str(), "!a,b!=c,d notin (x,y)"] {
            let (parsed, again) = (parse(selector), parse(&canonical(selector)));
            assert_eq!(parsed, again, "{selector}");
        }
        assert_eq!(canonical(""), "");
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        for sel in ["a b=c", "app in web", "x,,y", "bad key!", "app=two words"] {
            let e = parse(sel).expect_err(sel);
            assert!(e.to_string().starts_with("invalid label selector"), "{e}");
        }
        // An empty value is a valid value, as in Kubernetes.
        assert!(parse("app=").is_ok());
        let many = (0..MAX_TERMS + 1)
            .map(|i| format!("!k{i}"))
            .collect::<Vec<_>>();
        let e = parse(&many.join(",")).expect_err("too many");
        assert!(
            e.to_string().contains("33 requirements, more than 32"),
            "{e}"
        );
        assert!(
            e.selector.len() < 120,
            "the selector is shortened: {}",
            e.selector
        );
    }
}
