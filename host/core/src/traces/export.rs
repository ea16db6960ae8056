//! The exporter of the host's spans: OTLP over HTTP with protobuf to a collector, in
//! batches on the SDK's own thread, so a slow or absent collector never holds up a
//! reconcile (a full batch queue drops spans, as the SDK does).

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use super::TARGET;

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The endpoint is no `http://` or `https://` URL.
    #[error("--otlp-endpoint {0:?} is no http:// or https:// URL of an OTLP collector")]
    Endpoint(String),
    /// The exporter could not be built.
    #[error("cannot export traces to {endpoint}: {source}")]
    Exporter {
        /// The traces URL.
        endpoint: String,
        /// What the SDK said.
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The host's span exporter; flushes what it holds when shut down.
#[derive(Debug)]
pub struct TraceExport {
    provider: SdkTracerProvider,
    /// Where spans go: the collector's `/v1/traces`.
    pub traces_url: String,
}

impl TraceExport {
    /// Exports to the OTLP/HTTP collector at `endpoint` (its base URL, as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` gives it: spans go to `/v1/traces` there), as
    /// service `wasm-controller-manager`, instance `instance` (the replica's
    /// identity). Sampling follows the SDK's `OTEL_TRACES_SAMPLER` (parent-based,
    /// always on, by default). Also makes W3C trace context the propagation format.
    pub fn start(endpoint: &str, instance: &str) -> Result<TraceExport, ExportError> {
        let base = endpoint.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ExportError::Endpoint(endpoint.to_string()));
        }
        let traces_url = format!("{base}/v1/traces");
        // The exporter's HTTP client takes rustls' process-wide provider: ring, as the
        // registry client's and kube's (whichever comes first installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = SpanExporter::builder()
            .with_http()
            .with_endpoint(&traces_url)
            .build()
            .map_err(|source| ExportError::Exporter {
                endpoint: traces_url.clone(),
                source,
            })?;
        let resource = Resource::builder()
            .with_service_name("wasm-controller-manager")
            .with_attribute(KeyValue::new("service.instance.id", instance.to_string()))
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(TraceExport {
            provider,
            traces_url,
        })
    }

    /// The `tracing` layer that turns the host's spans (target [`TARGET`]) into
    /// OpenTelemetry spans; it takes nothing else.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer("wasm-controller-manager");
        let only_ours = Targets::new().with_target(TARGET, tracing::Level::TRACE);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(only_ours)
    }

    /// Exports the spans still held and stops the exporter.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, url = %self.traces_url, "spans not all exported at exit");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_that_is_no_url_is_refused_naming_it() {
        let error = TraceExport::start("collector:4318", "x").expect_err("refused");
        let said = error.to_string();
        assert!(
            said.contains("\"collector:4318\"") && said.contains("http://"),
            "{said}"
        );
    }

    #[test]
    fn spans_go_to_the_traces_path_of_the_base_url() {
        let export = TraceExport::start("http://127.0.0.1:4318/", "x").expect("built");
        assert_eq!(export.traces_url, "http://127.0.0.1:4318/v1/traces");
        export.shutdown();
    }
}
