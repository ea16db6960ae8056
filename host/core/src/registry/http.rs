//! The registry client's HTTP: a request sent within its pull's deadline, redirects
//! followed by hand, and bodies read within a bound as they arrive.
//!
//! Redirects are followed here rather than by the HTTP client because each hop is a
//! place the host is sent by a server it does not trust: at most a bounded number,
//! https unless the operator named that host plain http, and the registry's
//! credentials never sent to any host but the registry's own (a blob may be served
//! from object storage elsewhere; its digest, not its host, makes it trusted).

use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, LOCATION};
use reqwest::{Method, Response, Url};
use tokio::time::{Instant, timeout_at};

/// Why an exchange with a registry failed before it had an answer to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HttpError {
    /// Connecting, TLS or reading failed: the transport's error and its causes.
    Transport(String),
    /// The pull's deadline passed.
    TimedOut,
    /// An answer was larger than its bound.
    TooLarge {
        /// What was being read (`manifest`, `token reply`, ...).
        what: &'static str,
        /// The bound, in bytes.
        bound: u64,
    },
    /// A redirect the policy refuses (scheme, count, address).
    Redirect(String),
}

/// A request, before it is sent.
pub(super) struct Outgoing {
    pub method: Method,
    pub url: Url,
    pub headers: HeaderMap,
    pub body: Option<Bytes>,
    /// The `Authorization` to send, and the only host (`host[:port]`) it goes to.
    pub authorization: Option<(String, HeaderValue)>,
}

/// Sends requests to registries.
pub(super) struct Transport {
    client: reqwest::Client,
    plain_http: BTreeSet<String>,
    max_redirects: usize,
}

impl Transport {
    /// A transport trusting the system's roots and the PEM CAs in `ca_files`.
    pub fn new(
        ca_files: &[PathBuf],
        plain_http: BTreeSet<String>,
        max_redirects: usize,
    ) -> Result<Transport, String> {
        // The TLS of registries takes the process's crypto provider: ring, the one
        // kube's client is built with (an error only says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut certificates = Vec::new();
        for path in ca_files {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let found = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            certificates.extend(found);
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(10))
            .tls_certs_merge(certificates)
            .build()
            .map_err(|e| causes(&e))?;
        Ok(Transport {
            client,
            plain_http,
            max_redirects,
        })
    }

    /// The API root of registry `host`: `https://host/v2/`, or `http://` for a
    /// registry the operator named plain http.
    pub fn root(&self, host: &str) -> Result<Url, HttpError> {
        let scheme = match self.plain_http.contains(host) {
            true => "http",
            false => "https",
        };
        Url::parse(&format!("{scheme}://{host}/v2/"))
            .map_err(|e| HttpError::Transport(format!("{host:?} is not a registry address: {e}")))
    }

    /// Whether the host may be sent to `url`: https, or http to a host the
    /// operator named plain http.
    pub fn may_visit(&self, url: &Url) -> Result<(), HttpError> {
        match url.scheme() {
            "https" => Ok(()),
            "http" if self.plain_http.contains(&authority(url)) => Ok(()),
            scheme => Err(HttpError::Redirect(format!(
                "{scheme} to {} refused: only https, or http to a registry named by \
                 --plain-http-registry",
                shown(&authority(url))
            ))),
        }
    }

    /// Sends `out`, following redirects of a GET or HEAD as the policy allows; the
    /// answer's body is left unread.
    pub async fn send(&self, out: Outgoing, deadline: Instant) -> Result<Response, HttpError> {
        let follows = out.method == Method::GET || out.method == Method::HEAD;
        let mut url = out.url.clone();
        for _ in 0..=self.max_redirects {
            self.may_visit(&url)?;
            let response = self.send_once(&out, &url, deadline).await?;
            if !follows || !response.status().is_redirection() {
                return Ok(response);
            }
            let location = response.headers().get(LOCATION);
            let location = location.and_then(|l| l.to_str().ok());
            let location =
                location.ok_or(HttpError::Redirect("a redirect without a Location".into()))?;
            url = url.join(location).map_err(|e| {
                HttpError::Redirect(format!("a redirect to {}: {e}", shown(location)))
            })?;
        }
        Err(HttpError::Redirect(format!(
            "more than {} redirects",
            self.max_redirects
        )))
    }

    async fn send_once(
        &self,
        out: &Outgoing,
        url: &Url,
        deadline: Instant,
    ) -> Result<Response, HttpError> {
        let mut request = self.client.request(out.method.clone(), url.clone());
        request = request.headers(out.headers.clone());
        if let Some((host, value)) = &out.authorization
            && authority(url) == *host
        {
            request = request.header(AUTHORIZATION, value.clone());
        }
        if let Some(body) = &out.body {
            request = request.body(body.clone());
        }
        let sent = timeout_at(deadline, request.send()).await;
        let sent = sent.map_err(|_| HttpError::TimedOut)?;
        sent.map_err(|e| HttpError::Transport(causes(&e)))
    }
}

/// Reads `response`'s body, `what` naming it in errors: at most `bound` bytes, before
/// `deadline`; a body announced or found larger is refused without reading on.
pub(super) async fn read_body(
    mut response: Response,
    what: &'static str,
    bound: u64,
    deadline: Instant,
) -> Result<Bytes, HttpError> {
    let too_large = HttpError::TooLarge { what, bound };
    if response.content_length().is_some_and(|n| n > bound) {
        return Err(too_large);
    }
    let mut body = BytesMut::new();
    loop {
        let chunk = timeout_at(deadline, response.chunk()).await;
        let chunk = chunk.map_err(|_| HttpError::TimedOut)?;
        let Some(chunk) = chunk.map_err(|e| HttpError::Transport(causes(&e)))? else {
            return Ok(body.freeze());
        };
        if (body.len() + chunk.len()) as u64 > bound {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
}

/// `host[:port]` of `url`, the port only when it is not the scheme's default: how a
/// registry is named in a reference.
pub(super) fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// Text a server chose (an address, a header), escaped and cut for an error message.
pub(super) fn shown(text: &str) -> String {
    crate::logs::escape_cut(text, 200).0
}

/// An error and its causes on one line, escaped and cut: a transport error's own text
/// is only "error sending request"; the cause says connection refused or certificate
/// unknown. The text may name an address a redirect chose, so it is bounded.
pub(super) fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    crate::logs::escape_cut(&text, 1024).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(plain: &[&str]) -> Transport {
        let plain = plain.iter().map(|s| s.to_string()).collect();
        Transport::new(&[], plain, 2).expect("a transport")
    }

    #[test]
    fn only_https_is_visited_unless_the_operator_named_the_host_plain_http() {
        let t = transport(&["local:5000"]);
        let url = |u: &str| Url::parse(u).expect("url");
        assert!(t.may_visit(&url("https://r.example/v2/")).is_ok());
        assert!(t.may_visit(&url("http://local:5000/v2/")).is_ok());
        let refused = t.may_visit(&url("http://r.example/v2/")).expect_err("http");
        assert_eq!(
            refused,
            HttpError::Redirect(
                "http to r.example refused: only https, or http to a registry named by \
                 --plain-http-registry"
                    .into()
            )
        );
        assert!(t.may_visit(&url("file:///etc/passwd")).is_err());
        assert_eq!(
            t.root("local:5000").expect("root").as_str(),
            "http://local:5000/v2/"
        );
        assert_eq!(
            t.root("r.example").expect("root").as_str(),
            "https://r.example/v2/"
        );
    }

    #[test]
    fn an_authority_names_the_port_only_when_it_is_not_the_default() {
        let url = |u: &str| Url::parse(u).expect("url");
        assert_eq!(authority(&url("https://r.example:443/v2/")), "r.example");
        assert_eq!(
            authority(&url("https://r.example:5000/v2/")),
            "r.example:5000"
        );
        assert_eq!(authority(&url("http://10.0.0.1/v2/")), "10.0.0.1");
    }
}
