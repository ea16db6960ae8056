//! A registry that sends what a hostile or broken one would: plain HTTP on loopback
//! (the host is told so with `--plain-http-registry`), each repository a behaviour
//! (`/v2/<behaviour>/...`): an endless manifest, a manifest dripped a byte a second,
//! redirects elsewhere or without end, error bodies of many megabytes holding text
//! that must never be repeated, and token realms that are http or answer without end.
//!
//! Written by hand on a TCP listener, not a web framework, so each answer is exactly
//! the bytes the test wants on the wire (no framework would stream an endless body
//! or a status line with a body it never finishes).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Text that appears in every hostile body and must never reach an error, a status,
/// an Event or a log line.
pub const SECRET: &str = "INTERNAL-SERVICE-SECRET-7f3a";

/// A hostile registry on loopback, served until dropped.
pub struct HostileRegistry {
    /// `127.0.0.1:<port>`: the registry's name in references.
    pub address: String,
    task: JoinHandle<()>,
}

/// The one plugin the `plugin` repository serves: its manifest, config and layer.
#[derive(Clone)]
struct Served {
    manifest: Vec<u8>,
    blobs: Vec<(String, Vec<u8>)>,
}

impl Served {
    /// `component` in the CNCF layout, as `push` writes it.
    fn of(component: &[u8]) -> Served {
        let digest = |b: &[u8]| format!("sha256:{}", super::registry::sha256_hex(b));
        let config = b"{}".to_vec();
        let manifest = serde_json::json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.wasm.config.v0+json",
                "digest": digest(&config), "size": config.len()},
            "layers": [{"mediaType": "application/wasm", "digest": digest(component),
                "size": component.len()}]});
        Served {
            manifest: manifest.to_string().into_bytes(),
            blobs: vec![
                (digest(&config), config),
                (digest(component), component.to_vec()),
            ],
        }
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HostileRegistry {
    /// Starts one on a free loopback port, its `plugin` repository serving
    /// label-mirror.
    pub async fn start() -> anyhow::Result<HostileRegistry> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address: SocketAddr = listener.local_addr()?;
        let me = address.to_string();
        let served = Served::of(&super::plugin_bytes("label-mirror"));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, me.clone(), served.clone()));
            }
        });
        Ok(HostileRegistry {
            address: address.to_string(),
            task,
        })
    }

    /// The reference of behaviour `repository` (`endless`, `drip`, ...).
    pub fn reference(&self, repository: &str) -> String {
        format!("{}/{repository}:v1", self.address)
    }
}

/// Answers one connection's first request as its path says, then closes it.
async fn serve(stream: TcpStream, me: String, served: Served) {
    let mut reader = BufReader::new(stream);
    let mut request = String::new();
    if reader.read_line(&mut request).await.is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header).await {
            Ok(0) | Err(_) => return,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
    let head_only = request.starts_with("HEAD ");
    let mut stream = reader.into_inner();
    let _ = match path.starts_with("/v2/plugin/") {
        true => plugin(&mut stream, &path, head_only, &served).await,
        false => answer(&mut stream, &path, &me).await,
    };
}

/// The plugin's manifest or a blob of it, as a registry answers.
async fn plugin(
    stream: &mut TcpStream,
    path: &str,
    head_only: bool,
    served: &Served,
) -> std::io::Result<()> {
    let digest = |b: &[u8]| format!("sha256:{}", super::registry::sha256_hex(b));
    let body = match path.rsplit_once('/') {
        Some((_, _)) if path.contains("/manifests/") => Some(&served.manifest),
        Some((_, wanted)) => served
            .blobs
            .iter()
            .find(|(d, _)| d == wanted)
            .map(|(_, b)| b),
        None => None,
    };
    let Some(body) = body else {
        return head(stream, "404 Not Found", &["Content-Length: 0"]).await;
    };
    let length = format!("Content-Length: {}", body.len());
    let content = format!("Docker-Content-Digest: {}", digest(body));
    let kind = "Content-Type: application/vnd.oci.image.manifest.v1+json";
    head(stream, "200 OK", &[&length, &content, kind]).await?;
    match head_only {
        true => Ok(()),
        false => stream.write_all(body).await,
    }
}

async fn answer(stream: &mut TcpStream, path: &str, me: &str) -> std::io::Result<()> {
    let behaviour = match path.starts_with("/token") {
        true => "token",
        false => path.split('/').nth(2).unwrap_or_default(),
    };
    match behaviour {
        // A manifest that never ends, as fast as the socket takes it.
        "endless" => {
            head(
                stream,
                "200 OK",
                &["Content-Type: application/vnd.oci.image.manifest.v1+json"],
            )
            .await?;
            stream
                .write_all(b"{\"schemaVersion\":2,\"layers\":[")
                .await?;
            endless(stream, b"{\"mediaType\":\"application/wasm\",\"size\":1},").await
        }
        // A manifest dripped a byte a second: no read ever times out.
        "drip" => {
            head(
                stream,
                "200 OK",
                &["Content-Type: application/vnd.oci.image.manifest.v1+json"],
            )
            .await?;
            loop {
                stream.write_all(b" ").await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        // A redirect to an http address the host was not told is plain http.
        "elsewhere" => {
            let location = format!("Location: http://127.0.0.2:{}/v2/x", port_of(me));
            head(
                stream,
                "307 Temporary Redirect",
                &[&location, "Content-Length: 0"],
            )
            .await
        }
        // A redirect to itself, without end.
        "loop" => {
            let location = format!("Location: http://{me}/v2/loop/manifests/v1");
            head(
                stream,
                "307 Temporary Redirect",
                &[&location, "Content-Length: 0"],
            )
            .await
        }
        // An error whose body is megabytes of someone's secret page.
        "bigerror" => {
            head(
                stream,
                "500 Internal Server Error",
                &["Content-Type: text/html"],
            )
            .await?;
            let page = format!("<html>{SECRET} ").repeat(1 << 10);
            for _ in 0..(16 << 10) {
                stream.write_all(page.as_bytes()).await?;
            }
            Ok(())
        }
        // An error in the OCI format whose message is long and holds a newline.
        "denied" => {
            let message = format!("denied\nforged line {}", "x".repeat(10_000));
            let body = serde_json::json!({"errors": [{"code": "DENIED", "message": message,
                "detail": SECRET}]})
            .to_string();
            let length = format!("Content-Length: {}", body.len());
            head(
                stream,
                "403 Forbidden",
                &["Content-Type: application/json", &length],
            )
            .await?;
            stream.write_all(body.as_bytes()).await
        }
        // A token realm over http, which no operator named.
        "httprealm" => {
            let challenge = format!(
                "WWW-Authenticate: Bearer realm=\"http://127.0.0.2:{}/token\",service=\"x\"",
                port_of(me)
            );
            head(
                stream,
                "401 Unauthorized",
                &[&challenge, "Content-Length: 0"],
            )
            .await
        }
        // A token realm (this registry, told plain http) whose reply never ends.
        "endlesstoken" => {
            let challenge =
                format!("WWW-Authenticate: Bearer realm=\"http://{me}/token\",service=\"x\"");
            head(
                stream,
                "401 Unauthorized",
                &[&challenge, "Content-Length: 0"],
            )
            .await
        }
        "token" => {
            head(stream, "200 OK", &["Content-Type: application/json"]).await?;
            stream.write_all(b"{\"token\":\"").await?;
            endless(stream, b"aaaaaaaaaaaaaaaa").await
        }
        _ => head(stream, "404 Not Found", &["Content-Length: 0"]).await,
    }
}

async fn head(stream: &mut TcpStream, status: &str, headers: &[&str]) -> std::io::Result<()> {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).await
}

async fn endless(stream: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    let chunk = piece.repeat((64 << 10) / piece.len());
    loop {
        stream.write_all(&chunk).await?;
    }
}

fn port_of(address: &str) -> &str {
    address.rsplit(':').next().unwrap_or_default()
}
