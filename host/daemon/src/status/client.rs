//! Reading a running host's plugin table over HTTP, for `wasm-controller-manager plugins`.

use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::PluginStatus;

/// Why the plugin table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The address does not make a valid URL.
    #[error("invalid address {0:?}: expected host:port")]
    Address(String),
    /// No answer (the host is not running, or listens elsewhere).
    #[error(
        "no answer from {url}: {reason} (is the host running with --metrics-bind-address there?)"
    )]
    Connect {
        /// The URL asked.
        url: String,
        /// The transport error.
        reason: String,
    },
    /// An answer that is not the table.
    #[error("unexpected answer from {url}: {reason}")]
    Answer {
        /// The URL asked.
        url: String,
        /// Status or decoding error.
        reason: String,
    },
}

/// GETs `http://<address>/plugins` and decodes the table.
pub async fn fetch(address: &str) -> Result<Vec<PluginStatus>, FetchError> {
    let url = format!("http://{address}/plugins");
    let connector = HttpConnector::new();
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<&[u8]>>(connector);
    let parsed = url
        .parse()
        .map_err(|_| FetchError::Address(address.into()))?;
    let connect = |e: &dyn std::fmt::Display| FetchError::Connect {
        url: url.clone(),
        reason: e.to_string(),
    };
    let response = client.get(parsed).await.map_err(|e| connect(&e))?;
    let answer = |reason: String| FetchError::Answer {
        url: url.clone(),
        reason,
    };
    if !response.status().is_success() {
        return Err(answer(format!("HTTP {}", response.status())));
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| connect(&e))?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| answer(e.to_string()))
}
