//! What a registry said when it refused: the HTTP status and the errors of the OCI
//! distribution spec's error format (`{"errors": [{"code", "message"}]}`), each cut
//! and escaped. Only this reaches a `WasmPlugin`'s status, its Events and the log,
//! never the body itself: a registry (or an in-cluster service a `WasmPlugin` names as
//! one) could otherwise have any text of its choice copied into the cluster.

use serde::Deserialize;

/// Most errors kept from one answer.
const MAX_ERRORS: usize = 4;
/// Longest error code kept, in bytes.
const MAX_CODE_BYTES: usize = 64;
/// Longest error message kept, in bytes.
const MAX_MESSAGE_BYTES: usize = 256;

/// A registry's refusal, bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The registry's error codes (`MANIFEST_UNKNOWN`, `DENIED`) and messages.
    pub errors: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

impl Refusal {
    /// The refusal of an answer of `status` whose body is `body` (already bounded).
    pub fn of(status: u16, body: &[u8]) -> Refusal {
        let envelope = serde_json::from_slice::<Envelope>(body).ok();
        let entries = envelope.map(|e| e.errors).unwrap_or_default();
        let errors = (entries.into_iter().take(MAX_ERRORS))
            .map(|e| {
                (
                    code(&e.code),
                    crate::logs::escape_cut(&e.message, MAX_MESSAGE_BYTES).0,
                )
            })
            .collect();
        Refusal { status, errors }
    }

    /// Whether the registry says the manifest, repository or blob is unknown.
    pub fn is_unknown(&self) -> bool {
        let unknown = ["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN"];
        self.status == 404
            || self
                .errors
                .iter()
                .any(|(c, _)| unknown.contains(&c.as_str()))
    }

    /// Whether the registry refuses the credentials (or asks for some).
    pub fn is_unauthorized(&self) -> bool {
        matches!(self.status, 401 | 403)
    }
}

/// An error code as the spec writes them (upper case and `_`); anything else is cut
/// to those characters.
fn code(text: &str) -> String {
    (text.chars())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(MAX_CODE_BYTES)
        .collect()
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)?;
        for (i, (code, message)) in self.errors.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            match (code.is_empty(), message.is_empty()) {
                (false, false) => write!(f, "{sep}{code}: {message}")?,
                (false, true) => write!(f, "{sep}{code}")?,
                (true, _) => write!(f, "{sep}{message}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oci_error_format_is_read_and_nothing_else_is_repeated() {
        let body = br#"{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown",
            "detail": {"Tag": "v9"}}]}"#;
        let refusal = Refusal::of(404, body);
        assert_eq!(
            refusal.to_string(),
            "HTTP 404: MANIFEST_UNKNOWN: manifest unknown"
        );
        assert!(refusal.is_unknown());
        let html = Refusal::of(502, b"<html><body>internal secret page</body></html>");
        assert_eq!(
            html.to_string(),
            "HTTP 502",
            "a body that is not the format is not shown"
        );
    }

    #[test]
    fn codes_and_messages_are_cut_and_escaped() {
        let long = "x".repeat(10_000);
        let body = serde_json::json!({"errors": [
            {"code": "DENIED\n<script>", "message": format!("line\nforged {long}")},
            {"code": "A"}, {"code": "B"}, {"code": "C"}, {"code": "D"}, {"code": "E"}]});
        let refusal = Refusal::of(403, body.to_string().as_bytes());
        assert_eq!(refusal.errors.len(), MAX_ERRORS);
        assert_eq!(refusal.errors[0].0, "DENIEDscript");
        assert!(refusal.errors[0].1.starts_with("line\\nforged xxx"));
        assert!(refusal.errors[0].1.len() <= MAX_MESSAGE_BYTES + 64);
        assert!(refusal.is_unauthorized());
    }
}
