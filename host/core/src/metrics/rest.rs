//! `rest_client_requests_total`, as client-go counts it: a tower layer on the kube
//! client that counts every API request by status code, method and host.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::{Layer, Service};

use super::standard::RequestLabels;

/// Counts the requests of the service it wraps into `rest_client_requests_total`.
#[derive(Debug, Clone)]
pub struct CountRequests {
    requests: Family<RequestLabels, Counter>,
    host: String,
}

impl CountRequests {
    /// A layer counting into `requests`, naming the API server `host` (`host:port`).
    pub fn new(requests: Family<RequestLabels, Counter>, host: &str) -> CountRequests {
        CountRequests {
            requests,
            host: host.to_string(),
        }
    }
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose requests are counted.
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    layer: CountRequests,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Counted<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let method = request.method().to_string();
        let layer = self.layer.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            let labels = RequestLabels {
                code,
                method,
                host: layer.host,
            };
            layer.requests.get_or_create(&labels).inc();
            result
        })
    }
}
