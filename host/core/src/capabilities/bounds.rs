//! The size of every argument a plugin passes to a host call, checked at the edge
//! before anything is parsed, escaped or copied again, for the live cluster and the
//! test kit alike.
//!
//! A guest argument arrives as one host copy of what the guest passed. Everything after
//! that must cost at most a small multiple of it: a JSON body parsed into
//! `serde_json::Value` takes tens of bytes per element, a label selector a heap node per
//! term, an escaped message up to six bytes per byte. So each kind of argument has a
//! bound that the API server's own limits make harmless, and is refused past it with
//! `invalid` naming the bound — before the plugin's verb, kind or budget is looked at,
//! since that check is free and the others are not needed for a refusal.

use super::CapabilityError;

/// Longest JSON body (an object, a patch, a status): the API server's own limit on a
/// request body (3 MiB, `MaxRequestBodyBytes`); a larger one could never be written.
pub const MAX_BODY_BYTES: usize = 3 << 20;
/// Most JSON values (objects, arrays, and the members and elements in them) in one
/// body. Parsed into a tree each costs tens of bytes however short it is written (a
/// flat array of zeros takes some fifty times its size), so the count, not the bytes,
/// bounds what a parse costs; a Deployment has a few hundred, a ConfigMap one per key.
pub const MAX_BODY_VALUES: usize = 100_000;
/// Longest label selector of a `list`, `list-first` or `count`, as a watch's.
pub const MAX_SELECTOR_BYTES: usize = 1024;
/// Most labels one `patch-labels` sets and removes together.
pub const MAX_LABELS_PER_CALL: usize = 64;
/// Longest `uid` or `resourceVersion` precondition of a `delete`.
pub const MAX_PRECONDITION_BYTES: usize = 256;
/// Longest label value of a plugin metric update, and most values (as declared; the
/// declaration's bounds are checked when the update is applied).
pub const MAX_METRIC_ARGUMENT_BYTES: usize = 1024;

/// Refuses `what` of `op` when it is longer than `max` bytes.
pub fn at_most(
    op: &str,
    plugin: &str,
    what: &str,
    len: usize,
    max: usize,
) -> Result<(), CapabilityError> {
    if len <= max {
        return Ok(());
    }
    Err(CapabilityError::Invalid(format!(
        "{op} by plugin {plugin}: {what} is {len} bytes, more than the {max} a plugin may pass; \
         nothing was parsed or sent"
    )))
}

/// A JSON body: at most [`MAX_BODY_BYTES`] and [`MAX_BODY_VALUES`] values, counted
/// without parsing it.
pub fn body(op: &str, plugin: &str, what: &str, body: &str) -> Result<(), CapabilityError> {
    at_most(op, plugin, what, body.len(), MAX_BODY_BYTES)?;
    let values = json_values(body);
    if values <= MAX_BODY_VALUES {
        return Ok(());
    }
    Err(CapabilityError::Invalid(format!(
        "{op} by plugin {plugin}: {what} holds {values} JSON values or more, more than the \
         {MAX_BODY_VALUES} a plugin may pass; nothing was parsed or sent"
    )))
}

/// How many values `json` holds, at least: one, and one more for every `,`, `[` and
/// `{` outside strings (each starts or separates a value). One pass over the bytes,
/// nothing allocated; malformed JSON is counted as well as it goes and refused later
/// by the parser.
fn json_values(json: &str) -> usize {
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for byte in json.bytes() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b',' | b'[' | b'{') => values += 1,
            (false, _, _) => {}
        }
    }
    values
}

/// A label selector: at most [`MAX_SELECTOR_BYTES`] (its terms are bounded when it is
/// parsed).
pub fn selector(op: &str, plugin: &str, selector: Option<&str>) -> Result<(), CapabilityError> {
    let len = selector.map_or(0, str::len);
    at_most(op, plugin, "the label selector", len, MAX_SELECTOR_BYTES)
}

/// The labels of a `patch-labels`: at most [`MAX_LABELS_PER_CALL`] (each is checked
/// against Kubernetes' rules, which bound its size, before anything is sent).
pub fn labels(op: &str, plugin: &str, set: usize, remove: usize) -> Result<(), CapabilityError> {
    let count = set.saturating_add(remove);
    if count <= MAX_LABELS_PER_CALL {
        return Ok(());
    }
    Err(CapabilityError::Invalid(format!(
        "{op} by plugin {plugin}: {count} labels to set and remove, more than the \
         {MAX_LABELS_PER_CALL} one call may change; nothing was sent"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_of_too_many_values_is_refused_however_short() {
        let zeros = format!("[{}0]", "0,".repeat(MAX_BODY_VALUES));
        assert!(zeros.len() < MAX_BODY_BYTES);
        let e = body("patch-status", "p", "the status", &zeros).expect_err("many");
        assert!(e.to_string().contains("more than the 100000"), "{e}");
        // Commas, brackets and braces inside strings are not values.
        let text = format!(
            r#"{{"data": {{"k": "{}"}}}}"#,
            ",[{".repeat(MAX_BODY_VALUES)
        );
        assert!(body("apply", "p", "the object", &text).is_ok());
        assert_eq!(json_values(r#"{"a": [1, 2], "b": "x,\"[y"}"#), 5);
    }

    #[test]
    fn a_refusal_names_the_call_the_plugin_and_the_bound_but_not_the_input() {
        let huge = "x".repeat(MAX_BODY_BYTES + 1);
        let e = body("apply", "p", "the object", &huge).expect_err("too large");
        let text = e.to_string();
        assert!(
            text.contains("apply by plugin p: the object is 3145729 bytes"),
            "{text}"
        );
        assert!(text.contains("more than the 3145728"), "{text}");
        assert!(
            text.len() < 200,
            "the input is not quoted: {} bytes",
            text.len()
        );
        assert!(body("apply", "p", "the object", "{}").is_ok());
        let e = selector("count", "p", Some(&"!a,".repeat(400))).expect_err("long");
        assert!(
            e.to_string().contains("the label selector is 1200 bytes"),
            "{e}"
        );
        assert!(selector("count", "p", None).is_ok());
        let e = labels("patch-labels", "p", 60, 5).expect_err("many");
        assert!(e.to_string().contains("65 labels"), "{e}");
    }
}
