//! W3C trace context on the API requests a plugin's host calls make: a tower layer of
//! the host's kube clients that writes the current span's context (`traceparent`,
//! `tracestate`) into each request. kube's client queues requests through a buffer
//! whose worker enters the caller's span, so the current span is the host call's.
//! Without an exporter there is no span context, and nothing is written.

use std::task::{Context, Poll};

use opentelemetry_http::HeaderInjector;
use tower::{Layer, Service};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Writes the current span's trace context into each request.
#[derive(Debug, Clone, Copy, Default)]
pub struct PropagateContextLayer;

impl<S> Layer<S> for PropagateContextLayer {
    type Service = PropagateContext<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateContext { inner }
    }
}

/// The service of [`PropagateContextLayer`].
#[derive(Debug, Clone)]
pub struct PropagateContext<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for PropagateContext<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let context = tracing::Span::current().context();
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut HeaderInjector(request.headers_mut()));
        });
        self.inner.call(request)
    }
}
