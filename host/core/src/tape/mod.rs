//! Transcripts of a plugin's host calls: every call of one reconcile with its
//! arguments and the answer the plugin got, written by the daemon for the plugins an
//! operator names (`run --record-plugin NAME=DIR`, in `recorder`) and replayed by the
//! test kit, strictly in order (`test --replay DIR`, with `replaying`; a reconcile's own tape is `call_tape`). A transcript
//! is YAML a person can read: the objects the plugin read and wrote as objects, a
//! Secret's data redacted unless the operator asked for it.

mod archive;
mod call_tape;
mod recorder;
mod replaying;

pub use archive::{ArchiveError, write_archive};
pub use call_tape::{CallTape, MAX_TRANSCRIPT_BYTES, Replayed};
pub use recorder::{Recorder, RecorderError};
pub use replaying::{MAX_TRANSCRIPT_FILE_BYTES, read_transcript, transcript_files};

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

/// Hides what a call's arguments and answer hold of Secrets: every Secret object in
/// them (at any depth) as [`redact`] does, and, when the object the call names is a
/// Secret (a `patch`, `patch-status` or `patch-labels` of one, whose body carries no
/// kind), every value its body sets.
pub fn redact_call(args: &mut Value, answer: &mut Value) {
    let named = args.pointer("/object/kind").and_then(Value::as_str);
    if named.is_some_and(is_secret_kind) {
        for body in ["patch", "status", "add"] {
            if let Some(body) = args.get_mut(body) {
                hide_values(body, false);
            }
        }
    }
    redact(args);
    redact(answer);
}

/// Whether `kind` (`v1/Secret`, as `display_gvk` writes it, or a bare `Secret`) is a
/// Secret's.
fn is_secret_kind(kind: &str) -> bool {
    kind == "Secret" || kind.ends_with("/Secret")
}

/// Replaces, in every Secret in `value` (an object, or a list of them at any depth),
/// the values of `data` and `stringData` with [`REDACTED_DATA`] and [`REDACTED`], and
/// every annotation's value with [`REDACTED`]: `kubectl apply` keeps a Secret's whole
/// content in its `last-applied-configuration` annotation.
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
                let annotations = map
                    .get_mut("metadata")
                    .and_then(|m| m.get_mut("annotations"));
                if let Some(Value::Object(annotations)) = annotations {
                    annotations.values_mut().for_each(|v| *v = json!(REDACTED));
                }
            }
            map.values_mut().for_each(redact);
        }
        _ => {}
    }
}

/// Every string `value` sets replaced (under a `data` key by [`REDACTED_DATA`], else
/// by [`REDACTED`]), but a JSON patch's `op`, `path` and `from`, which say where, not
/// what.
fn hide_values(value: &mut Value, in_data: bool) {
    match value {
        Value::String(_) if in_data => *value = json!(REDACTED_DATA),
        Value::String(_) => *value = json!(REDACTED),
        Value::Array(items) => items.iter_mut().for_each(|v| hide_values(v, in_data)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !matches!(key.as_str(), "op" | "path" | "from") {
                    hide_values(v, in_data || key == "data");
                }
            }
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
    fn a_secret_applied_by_kubectl_keeps_nothing_in_its_annotations() {
        let last = r#"{"apiVersion":"v1","kind":"Secret","stringData":{"password":"hunter2"}}"#;
        let mut secret = json!({"kind": "Secret", "metadata": {"name": "s",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last}},
            "data": {"password": "aHVudGVyMg=="}});
        redact(&mut secret);
        assert!(!secret.to_string().contains("hunter2"), "{secret}");
        assert!(!secret.to_string().contains("aHVudGVyMg"), "{secret}");
    }

    #[test]
    fn a_patch_of_a_secret_hides_what_it_sets_whatever_its_shape() {
        let object = json!({"kind": "v1/Secret", "namespace": "ns", "name": "s"});
        let mut merge = json!({"object": object, "type": "merge",
            "patch": {"stringData": {"token": "t0ps3cret"}, "metadata": {"annotations": {"a": "t0ps3cret"}}}});
        redact_call(&mut merge, &mut Value::Null);
        assert!(!merge.to_string().contains("t0ps3cret"), "{merge}");
        let mut json_patch = json!({"object": object, "type": "json",
            "patch": [{"op": "add", "path": "/data/token", "value": "dDBwczNjcmV0"}]});
        redact_call(&mut json_patch, &mut Value::Null);
        assert_eq!(json_patch["patch"][0]["path"], "/data/token", "where stays");
        assert_eq!(json_patch["patch"][0]["value"], REDACTED);
        let mut config_map = json!({"object": {"kind": "v1/ConfigMap", "name": "c"},
            "patch": {"data": {"a": "b"}}});
        redact_call(&mut config_map, &mut Value::Null);
        assert_eq!(config_map["patch"]["data"]["a"], "b", "not a Secret: kept");
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
