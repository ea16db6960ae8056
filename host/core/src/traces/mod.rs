//! OpenTelemetry traces of reconciles, off unless `--otlp-endpoint` (or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) names a collector: a span per reconcile (plugin,
//! key, result, queue wait), a child span per host call it makes (function, kind, API
//! verb, status), and the W3C trace context of the call on the API requests it causes,
//! so a slow reconcile can be followed into the API server's own spans.
//!
//! The spans carry the target [`TARGET`]: only the exporting layer takes them (the log
//! never shows them), and with no exporter no layer does, so a span costs a disabled
//! callsite check.

mod export;
mod propagate;

pub use export::{ExportError, TraceExport};
pub use propagate::{PropagateContext, PropagateContextLayer};

/// The `tracing` target of the host's spans.
pub const TARGET: &str = "wcm_traces";
