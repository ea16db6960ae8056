//! The host's HTTP endpoint: Prometheus metrics, liveness and readiness probes, and the
//! plugin table.
//!
//! One listener, as controller-runtime's manager serves `/metrics` and `/healthz`:
//! scrapers, kubelet probes and `wasm-controller-manager plugins` reach the daemon
//! without a second port.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::probes::Probes;
use crate::status::{PluginStatus, PluginTable};

/// What the handlers read.
#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    table: PluginTable,
    probes: Probes,
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for metrics: {source}")]
pub struct ServerError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The bind error.
    #[source]
    pub source: std::io::Error,
}

/// The running endpoint.
#[derive(Debug)]
pub struct Server {
    /// The address actually bound (a `:0` port resolved).
    pub local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz`, `/readyz` and `/plugins` (JSON)
/// until the returned value is dropped.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    table: PluginTable,
    probes: Probes,
) -> Result<Server, ServerError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError { addr, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ServerError { addr, source })?;
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/plugins", get(plugins))
        .with_state(Shared {
            metrics,
            table,
            probes,
        });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    tracing::info!(address = %local_addr, "serving /metrics, /healthz, /readyz and /plugins");
    Ok(Server { local_addr, task })
}

/// 200 `ok`, or 500 with the reason (the kubelet then restarts the container).
async fn healthz(State(shared): State<Shared>) -> (StatusCode, String) {
    probe_answer(shared.probes.liveness(), StatusCode::INTERNAL_SERVER_ERROR)
}

/// 200 `ok`, or 503 with what is still missing.
async fn readyz(State(shared): State<Shared>) -> (StatusCode, String) {
    probe_answer(shared.probes.readiness(), StatusCode::SERVICE_UNAVAILABLE)
}

fn probe_answer(result: Result<(), String>, failure: StatusCode) -> (StatusCode, String) {
    match result {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => (failure, why),
    }
}

async fn plugins(State(shared): State<Shared>) -> Json<Vec<PluginStatus>> {
    Json(shared.table.rows())
}

async fn scrape(State(Shared { metrics, .. }): State<Shared>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}
