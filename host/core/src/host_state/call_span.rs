//! The span of one host call (exported with `--otlp-endpoint`), a child of its
//! reconcile's: the WIT function, the kind it is about, the API verb RBAC knows it by
//! (a read is served from the host's caches, a write reaches the API server with the
//! span's trace context) and how it ended.

use tracing::field::Empty;

use crate::contract::Capability;
use crate::contract::GuestError;
use crate::metrics::HostCallResult;
use crate::traces::TARGET;

/// A host call about to run, with its span.
pub(super) struct Call {
    /// Which import.
    pub function: Capability,
    /// Its span; disabled while no exporter runs.
    pub span: tracing::Span,
}

impl Call {
    /// The call of `function`; `kind` (the kind it is about, as `group/version/kind`)
    /// is only worked out for a span that is exported.
    pub fn new(function: Capability, kind: impl FnOnce() -> Option<String>) -> Call {
        let name = function.name();
        let span = tracing::info_span!(target: TARGET, "host call", otel.name = name,
            function = name, verb = api_verb(function), kind = Empty, status = Empty,
            otel.status_code = Empty);
        if !span.is_disabled()
            && let Some(kind) = kind()
        {
            span.record("kind", kind);
        }
        Call { function, span }
    }

    /// Records how the call ended: `ok`, the contract's error code, or `host_fault`
    /// (a trap, the span's status then an error).
    pub fn ended<T>(span: &tracing::Span, answer: &wasmtime::Result<Result<T, GuestError>>) {
        if span.is_disabled() {
            return;
        }
        let status = match answer {
            Ok(result) => HostCallResult::of(result),
            Err(_) => HostCallResult::host_fault,
        };
        span.record("status", format!("{status:?}"));
        if status == HostCallResult::host_fault {
            span.record("otel.status_code", "error");
        }
    }
}

/// The API verb a call is authorized by (`none` for the plugin's own metrics).
fn api_verb(function: Capability) -> &'static str {
    function.descriptor().api_verb.unwrap_or("none")
}

/// The kind of an object a plugin passes whole (`apply`, `create`, `update`), as
/// `group/version/kind`, if its JSON says.
pub(super) fn kind_in(object: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Head {
        api_version: String,
        kind: String,
    }
    let head: Head = serde_json::from_str(object).ok()?;
    Some(format!("{}/{}", head.api_version, head.kind))
}
