//! A real OpenTelemetry Collector (built from pinned modules: the OTLP receiver and
//! the file exporter) on loopback, for the tests and the bench of the host's traces,
//! and the spans it wrote, read back from its file.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use wcm_control_plane::ControlPlane;

/// A collector receiving OTLP/HTTP on loopback and writing what it gets to a file.
pub struct Collector {
    child: Child,
    spans: PathBuf,
    /// Its OTLP/HTTP base URL, for `--otlp-endpoint`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Collector {
    /// Starts one and waits until it listens.
    pub fn start() -> Result<Collector> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let spans = dir.path().join("spans.json");
        let config = dir.path().join("collector.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
                 exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n\
                 \x20 pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n",
                spans.display()
            ),
        )?;
        let child = Command::new(ControlPlane::otelcol())
            .arg(format!("--config=file:{}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("the collector (built by control-plane/scripts/build.sh otelcol)")?;
        let collector = Collector {
            child,
            spans,
            endpoint: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(Instant::now() < deadline, "the collector never listened");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(collector)
    }

    /// Every span the collector has written, with its resource's attributes.
    pub fn spans(&self) -> Vec<Span> {
        let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
        let lines = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        let mut out = Vec::new();
        for batch in lines {
            for resource in batch["resourceSpans"].as_array().into_iter().flatten() {
                let owner = attributes(&resource["resource"]["attributes"]);
                let scopes = resource["scopeSpans"].as_array().into_iter().flatten();
                for span in scopes.flat_map(|s| s["spans"].as_array().into_iter().flatten()) {
                    out.push(Span::of(span, owner.clone()));
                }
            }
        }
        out
    }
}

/// One span as OTLP JSON has it.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its name (`otel.name` where the host sets one).
    pub name: String,
    /// Trace id, hex.
    pub trace: String,
    /// Span id, hex.
    pub id: String,
    /// Parent span id, hex; empty for a root.
    pub parent: String,
    /// Start, Unix nanoseconds.
    pub start: u64,
    /// End, Unix nanoseconds.
    pub end: u64,
    /// Its attributes as text.
    pub attributes: BTreeMap<String, String>,
    /// Its resource's attributes as text.
    pub resource: BTreeMap<String, String>,
}

impl Span {
    fn of(span: &Value, resource: BTreeMap<String, String>) -> Span {
        let text = |key: &str| span[key].as_str().unwrap_or("").to_string();
        let nanos = |key: &str| text(key).parse().unwrap_or(0);
        Span {
            name: text("name"),
            trace: text("traceId"),
            id: text("spanId"),
            parent: text("parentSpanId"),
            start: nanos("startTimeUnixNano"),
            end: nanos("endTimeUnixNano"),
            attributes: attributes(&span["attributes"]),
            resource,
        }
    }

    /// The attribute `key`, empty if it has none.
    pub fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map(String::as_str).unwrap_or("")
    }
}

/// OTLP key-value attributes as text.
fn attributes(list: &Value) -> BTreeMap<String, String> {
    let pairs = list.as_array().into_iter().flatten();
    pairs
        .filter_map(|kv| {
            let value = kv["value"].as_object()?.values().next()?;
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            Some((kv["key"].as_str()?.to_string(), text))
        })
        .collect()
}
