//! The host's HTTP endpoint: Prometheus metrics, liveness and readiness probes, and the
//! plugin table.
//!
//! One listener, as controller-runtime's manager serves `/metrics` and `/healthz`:
//! scrapers, kubelet probes and `wasm-controller-manager plugins` reach the daemon
//! without a second port. It is served on a thread and a runtime of its own, as the
//! leader election is: the runtime's worker threads run plugins' guest code and the
//! host work they cause, which yield often but can keep every worker busy at once,
//! and a liveness probe waiting for one would restart a host that works.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::probes::Probes;
use crate::status::{PluginStatus, PluginTable};
use wcm_core::metrics::Metrics;

/// What the handlers read.
#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    table: PluginTable,
    probes: Probes,
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve {addr} for metrics: {source}")]
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
    /// Stops it, finishing requests in flight.
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz`, `/readyz` and `/plugins` (JSON)
/// until the returned value is dropped.
pub fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    table: PluginTable,
    probes: Probes,
) -> Result<Server, ServerError> {
    let bound = std::net::TcpListener::bind(addr);
    let listener = bound.and_then(|l| l.set_nonblocking(true).map(|()| l));
    let listener = listener.map_err(|source| ServerError { addr, source })?;
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
    let (stop, stopped) = oneshot::channel();
    let serving = std::thread::Builder::new()
        .name("http-endpoint".into())
        .spawn(move || run(listener, app, stopped));
    serving.map_err(|source| ServerError { addr, source })?;
    tracing::info!(address = %local_addr, "serving /metrics, /healthz, /readyz and /plugins");
    Ok(Server { stop: Some(stop) })
}

/// Serves `app` on `listener` on this thread's own runtime until `stopped`.
fn run(listener: std::net::TcpListener, app: Router, stopped: oneshot::Receiver<()>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let served = runtime.map_err(std::io::Error::other).and_then(|runtime| {
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener)?;
            let stop = async move {
                let _ = stopped.await;
            };
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        })
    });
    if let Err(e) = served {
        tracing::error!(error = %e, "metrics endpoint stopped");
    }
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
