//! The daemon's clients: the host's own, counted as client-go counts its requests,
//! and one per plugin acting as its ServiceAccount.

use std::sync::Arc;

use wcm_core::metrics::Metrics;
use wcm_core::metrics::rest::CountRequests;
use wcm_core::rights::identity::{ClientFactory, PluginIdentities, ServiceAccounts};
use wcm_core::traces::PropagateContextLayer;

/// A client whose requests are counted in `rest_client_requests_total`, as client-go's,
/// and carry the trace context of the span they are made in (a plugin's host call).
pub fn counted_client(
    config: kube::Config,
    metrics: &Metrics,
) -> Result<kube::Client, kube::Error> {
    let host = (config.cluster_url.authority())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let layer = CountRequests::new(metrics.standard.rest_requests.clone(), &host);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .with_layer(&PropagateContextLayer)
        .build())
}

/// A client per plugin acting as its ServiceAccount of `accounts`, or without, the
/// host's client for every plugin.
pub(super) fn plugin_identities(
    accounts: Option<ServiceAccounts>,
    config: kube::Config,
    client: kube::Client,
    metrics: &Arc<Metrics>,
) -> PluginIdentities {
    let Some(accounts) = accounts else {
        tracing::warn!(
            "--impersonate-plugins=false: plugins act with the host's identity and share \
            its rights; RBAC cannot tell them apart or limit them"
        );
        return PluginIdentities::shared(client);
    };
    tracing::info!(user = %accounts.user("<plugin>"), "plugins act as their own ServiceAccounts");
    let metrics = metrics.clone();
    let build: ClientFactory =
        Arc::new(move |config| counted_client(config, &metrics).map_err(|e| e.to_string()));
    PluginIdentities::impersonating(client, config, accounts, build)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    use k8s_openapi::api::core::v1::ConfigMap;
    use opentelemetry::trace::{TraceContextExt, TracerProvider};
    use tracing::Instrument;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// The `traceparent` of each request a local HTTP server received.
    async fn recording_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let app = Router::new().fallback(get(move |headers: HeaderMap| async move {
            let parent = headers.get("traceparent").and_then(|v| v.to_str().ok());
            let mut seen = record.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(parent.map(str::to_string));
            (StatusCode::NOT_FOUND, "{}")
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_made_in_a_span_carries_its_trace_context_and_one_outside_none() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let (url, seen) = recording_server().await;
        let config = kube::Config::new(url.parse().expect("a URL"));
        let client = counted_client(config, &Metrics::new()).expect("a client");
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");

        let span = tracing::info_span!(target: wcm_core::traces::TARGET, "host call");
        let context = span.context().span().span_context().clone();
        let _ = api.get("in-a-span").instrument(span).await;
        let _ = api.get("outside").await;

        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let expected = format!("00-{}-{}-01", context.trace_id(), context.span_id());
        assert_eq!(seen, [Some(expected), None]);
    }
}
