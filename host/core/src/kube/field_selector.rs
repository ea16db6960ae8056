//! Field selectors (`spec.nodeName=node-1,status.phase!=Failed`) as plugins declare
//! them on a watch: parsed and checked at load, sent to the API server as given, and
//! matched against an object's JSON where the host must decide alone (a plugin's own
//! write stored before its watch event, the test kit's in-memory cluster).
//!
//! Written here because kube-core passes field selectors through as strings and has
//! no parser or matcher for them.

use serde_json::Value;

/// Longest field selector accepted.
pub const MAX_LEN: usize = 1024;

/// A field selector the API server would reject for its form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field selector {selector:?}: {reason}")]
pub struct FieldSelectorError {
    /// The selector as given, shortened.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One `field=value` or `field!=value` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    path: Vec<String>,
    value: String,
    equal: bool,
}

/// A parsed field selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<Requirement>,
}

/// Parses `selector`; the empty string selects everything.
pub fn parse(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
    let err = |reason: String| FieldSelectorError {
        selector: crate::logs::shorten(selector),
        reason,
    };
    if selector.len() > MAX_LEN {
        return Err(err(format!(
            "{} bytes, more than {MAX_LEN}",
            selector.len()
        )));
    }
    // No object's field holds one, and the selector reaches the host's log lines and
    // metric labels (an informer's `fields`).
    if selector.chars().any(char::is_control) {
        return Err(err("control characters are not allowed".into()));
    }
    let mut requirements = Vec::new();
    for term in split_unescaped(selector, ',') {
        if term.is_empty() && selector.is_empty() {
            continue;
        }
        requirements.push(requirement(&term).map_err(err)?);
    }
    Ok(FieldSelector { requirements })
}

/// `selector` with its requirements sorted and once each (escapes kept), so that two
/// watches whose field selectors list the same requirements share one informer. For a
/// selector that parses.
pub fn canonical(selector: &str) -> String {
    let mut terms: Vec<String> = (split_unescaped(selector, ',').into_iter())
        .map(|t| t.trim().replacen("==", "=", 1))
        .filter(|t| !t.is_empty())
        .collect();
    terms.sort();
    terms.dedup();
    terms.join(",")
}

fn requirement(term: &str) -> Result<Requirement, String> {
    let (field, value, equal) = ["!=", "==", "="]
        .iter()
        .find_map(|op| term.split_once(op).map(|(f, v)| (f, v, *op != "!=")))
        .ok_or_else(|| format!("{term:?} has no operator (=, == or !=)"))?;
    let is_field_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    let path: Vec<String> = field.split('.').map(str::to_string).collect();
    if field.is_empty() || !field.chars().all(is_field_char) || path.iter().any(String::is_empty) {
        return Err(format!(
            "field {field:?} must be a dotted path such as status.phase"
        ));
    }
    Ok(Requirement {
        path,
        value: unescape(value)?,
        equal,
    })
}

/// Splits on `sep` where it is not escaped by a backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let (mut parts, mut current, mut escaped) = (Vec::new(), String::new(), false);
    for c in s.chars() {
        match c {
            _ if escaped => {
                current.push('\\');
                current.push(c);
                escaped = false;
            }
            '\\' => escaped = true,
            c if c == sep => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if escaped {
        current.push('\\');
    }
    parts.push(current);
    parts
}

/// Undoes the API server's value escapes (`\\`, `\,`, `\=`).
fn unescape(value: &str) -> Result<String, String> {
    let (mut out, mut chars) = (String::new(), value.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                _ => return Err(format!("value {value:?} has an invalid escape")),
            },
            '=' | ',' => return Err(format!("value {value:?} has an unescaped {c:?}")),
            c => out.push(c),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Whether `object` (Kubernetes JSON) satisfies every requirement. A missing
    /// field reads as the empty string, as the API server's field sets have it.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let found = r.path.iter().try_fold(object, |v, step| v.get(step));
            let text = match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (text == r.value) == r.equal
        })
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requirements_match_fields_like_the_api_server() {
        let pod = json!({"metadata": {"name": "web-1", "namespace": "shop"},
            "spec": {"nodeName": "node-1", "hostNetwork": false},
            "status": {"phase": "Running"}});
        for (selector, want) in [
            ("", true),
            ("metadata.name=web-1", true),
            ("metadata.name==web-2", false),
            ("status.phase!=Failed", true),
            ("spec.nodeName=node-1,status.phase=Running", true),
            ("spec.nodeName=node-1,status.phase=Pending", false),
            ("spec.hostNetwork=false", true),
            ("spec.schedulerName=", true),
            ("spec.schedulerName!=", false),
        ] {
            let parsed = parse(selector).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parsed.matches(&pod), want, "{selector}");
        }
        let escaped = parse(r"metadata.name=a\,b").expect("valid");
        assert!(escaped.matches(&json!({"metadata": {"name": "a,b"}})));
    }

    #[test]
    fn field_selectors_listing_the_same_requirements_are_written_the_same() {
        let one = canonical("status.phase!=Failed,spec.nodeName==a\\,b");
        assert_eq!(one, "spec.nodeName=a\\,b,status.phase!=Failed");
        assert_eq!(
            canonical("spec.nodeName=a\\,b,status.phase!=Failed,status.phase!=Failed"),
            one
        );
        let pod = serde_json::json!({"spec": {"nodeName": "a,b"}, "status": {"phase": "Running"}});
        let given = parse("status.phase!=Failed,spec.nodeName==a\\,b").expect("parses");
        assert!(parse(&one).expect("parses").matches(&pod) && given.matches(&pod));
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        for (selector, reason) in [
            ("status.phase", "has no operator"),
            ("=Running", "must be a dotted path"),
            ("status..phase=x", "must be a dotted path"),
            ("status.phase=a=b", "unescaped '='"),
            (r"status.phase=a\b", "invalid escape"),
            ("a=b,,c=d", "has no operator"),
            ("metadata.name=a\nb", "control characters"),
        ] {
            let err = parse(selector).expect_err(selector).to_string();
            assert!(
                err.starts_with("invalid field selector") && err.contains(reason),
                "{err}"
            );
        }
        let long = format!("metadata.name={}", "x".repeat(MAX_LEN));
        assert!(
            parse(&long)
                .expect_err("too long")
                .to_string()
                .contains("more than 1024")
        );
    }
}
