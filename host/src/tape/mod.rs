//! Transcripts of a plugin's host calls: every call of one reconcile with its
//! arguments and the answer the plugin got, written by the daemon for the plugins an
//! operator names (`run --record-plugin NAME=DIR`, in `recorder`) and replayed by the
//! test kit, strictly in order (`test --replay DIR`, with `replaying`; a reconcile's own tape is `call_tape`). A transcript
//! is YAML a person can read: the objects the plugin read and wrote as objects, a
//! Secret's data redacted unless the operator asked for it.

mod call_tape;
mod recorder;
mod replaying;

pub use call_tape::{CallTape, MAX_TRANSCRIPT_BYTES, Replayed};
pub use recorder::{Recorder, RecorderError};
pub use replaying::read_dir;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::contract::{Cause, ErrorCode, GuestError};
use crate::keys::ReconcileKey;
use crate::kube::discovery::{display_gvk, split_api_version};

/// What a redacted `stringData` value is replaced with.
pub const REDACTED: &str = "<redacted>";
/// What a redacted `data` value is replaced with: [`REDACTED`] in base64, so a
/// plugin that decodes a Secret's data still can when it is replayed.
pub const REDACTED_DATA: &str = "PHJlZGFjdGVkPg==";

/// One host call and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TapedCall {
    /// The contract function (`get`, `patch-labels`, ...).
    pub call: String,
    /// Its arguments, JSON the plugin passed parsed.
    pub args: Value,
    /// `{ok: ...}`, `{error: {code, message, ...}}`, or `{trap: ...}` for a host fault.
    pub answer: Value,
}

/// The key of a transcript's reconcile, as the plugin got it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TapedKey {
    /// `v1/Pod`, `apps/v1/Deployment` (as `display_gvk` writes kinds); none for a
    /// fixed key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The namespace, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name, or the fixed key.
    pub name: String,
}

impl TapedKey {
    /// `key` as a transcript writes it.
    pub fn of(key: &ReconcileKey) -> TapedKey {
        TapedKey {
            kind: key.kind.as_ref().map(display_gvk),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }
    }

    /// The key it names.
    pub fn key(&self) -> ReconcileKey {
        // As `display_gvk` writes it: `apiVersion/kind`.
        let kind = self.kind.as_deref().map(|text| {
            let (api_version, kind) = text.rsplit_once('/').unwrap_or(("", text));
            let (group, version) = split_api_version(api_version);
            kube::core::GroupVersionKind::gvk(group, version, kind)
        });
        ReconcileKey {
            kind,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// One reconcile, recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// The plugin.
    pub plugin: String,
    /// The key reconciled.
    pub key: TapedKey,
    /// The plugin's wall clock when the reconcile began (RFC 3339, whole seconds).
    pub clock: String,
    /// What the reconcile returned: `done`, `requeue-after 30s`, the error.
    pub result: String,
    /// Whether Secrets' data was replaced by [`REDACTED`].
    pub redacted: bool,
    /// Whether calls were left out past the transcript's size bound.
    #[serde(default)]
    pub truncated: bool,
    /// The calls, in order.
    pub calls: Vec<TapedCall>,
}

/// An answer a transcript can hold and give back.
pub trait Taped: Sized {
    /// The answer as a transcript writes it.
    fn to_tape(&self) -> Value;
    /// The answer a transcript holds; none if it is not of this type.
    fn from_tape(value: &Value) -> Option<Self>;
}

impl Taped for String {
    fn to_tape(&self) -> Value {
        parsed(self)
    }
    fn from_tape(value: &Value) -> Option<String> {
        Some(value.to_string())
    }
}

impl Taped for Vec<String> {
    fn to_tape(&self) -> Value {
        Value::Array(self.iter().map(|s| parsed(s)).collect())
    }
    fn from_tape(value: &Value) -> Option<Vec<String>> {
        Some(value.as_array()?.iter().map(Value::to_string).collect())
    }
}

impl Taped for u64 {
    fn to_tape(&self) -> Value {
        json!(self)
    }
    fn from_tape(value: &Value) -> Option<u64> {
        value.as_u64()
    }
}

impl Taped for () {
    fn to_tape(&self) -> Value {
        Value::Null
    }
    fn from_tape(value: &Value) -> Option<()> {
        value.is_null().then_some(())
    }
}

/// JSON text a plugin passed or got, parsed; as a string when it is not JSON.
pub fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// A call's answer as a transcript writes it: the plugin's result, or the host fault
/// that trapped its call.
pub fn answer_to_tape<T: Taped>(answer: &wasmtime::Result<Result<T, GuestError>>) -> Value {
    match answer {
        Ok(Ok(value)) => json!({"ok": value.to_tape()}),
        Ok(Err(e)) => json!({"error": error_to_tape(e)}),
        Err(fault) => json!({"trap": fault.to_string()}),
    }
}

fn error_to_tape(e: &GuestError) -> Value {
    let causes: Vec<Value> = (e.causes.iter())
        .map(|c| json!({"field": c.field, "reason": c.reason, "message": c.message, "manager": c.manager}))
        .collect();
    json!({"code": e.code.as_str(), "message": e.message, "status": e.status,
        "retryAfterMs": e.retry_after_ms, "causes": causes})
}

/// The plugin's result a transcript holds; `Err` with the host fault's message for
/// a trap, none if the answer is malformed or not of type `T`.
pub fn answer_from_tape<T: Taped>(answer: &Value) -> Option<Result<Result<T, GuestError>, String>> {
    if let Some(ok) = answer.get("ok") {
        return T::from_tape(ok).map(|v| Ok(Ok(v)));
    }
    if let Some(trap) = answer.get("trap") {
        return Some(Err(trap.as_str().unwrap_or_default().to_string()));
    }
    error_from_tape(answer.get("error")?).map(|e| Ok(Err(e)))
}

/// The contract error a transcript's `error` holds.
fn error_from_tape(error: &Value) -> Option<GuestError> {
    let text = |v: &Value, f: &str| {
        v.get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let code = ErrorCode::ALL
        .into_iter()
        .find(|c| c.as_str() == text(error, "code"))?;
    let causes = (error
        .get("causes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten())
    .map(|c| Cause {
        field: text(c, "field"),
        reason: text(c, "reason"),
        message: text(c, "message"),
        manager: c.get("manager").and_then(Value::as_str).map(str::to_string),
    })
    .collect();
    let status = error.get("status").and_then(Value::as_u64);
    Some(GuestError {
        code,
        message: text(error, "message"),
        status: status.and_then(|s| u16::try_from(s).ok()),
        retry_after_ms: error.get("retryAfterMs").and_then(Value::as_u64),
        causes,
    })
}

/// Replaces the values of `data` and `stringData` of every Secret in `value` (an
/// object, or a list of them at any depth) with [`REDACTED_DATA`] and [`REDACTED`].
pub fn redact(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::Object(map) => {
            if map.get("kind").and_then(Value::as_str) == Some("Secret") {
                for (field, hidden) in [("data", REDACTED_DATA), ("stringData", REDACTED)] {
                    if let Some(Value::Object(data)) = map.get_mut(field) {
                        data.values_mut().for_each(|v| *v = json!(hidden));
                    }
                }
            }
            map.values_mut().for_each(redact);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secrets_data_is_redacted_wherever_it_is() {
        let mut list = json!([{"kind": "Secret", "data": {"token": "czNjcjN0"}},
            {"kind": "ConfigMap", "data": {"a": "b"}}]);
        redact(&mut list);
        assert_eq!(list[0]["data"]["token"], REDACTED_DATA);
        assert_eq!(list[1]["data"]["a"], "b");
    }

    #[test]
    fn answers_go_to_the_tape_and_come_back() {
        let ok: wasmtime::Result<Result<String, GuestError>> = Ok(Ok("{\"a\":1}".into()));
        let taped = answer_to_tape(&ok);
        assert_eq!(taped, json!({"ok": {"a": 1}}));
        let back = answer_from_tape::<String>(&taped).expect("ok");
        assert_eq!(back, Ok(Ok("{\"a\":1}".to_string())));
        let mut error = GuestError::new(ErrorCode::Conflict, "apply x: conflict");
        error.status = Some(409);
        let failed: wasmtime::Result<Result<(), GuestError>> = Ok(Err(error.clone()));
        let back = answer_from_tape::<()>(&answer_to_tape(&failed)).expect("error");
        assert_eq!(back, Ok(Err(error)));
    }
}
