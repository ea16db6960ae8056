//! The boundary fuzzer's second half: the doors other than a plugin's arguments. Each
//! case is a sequence of inputs from outside — arbitrary JSON as `WasmPlugin`s (a
//! list and a watch event, decoded as the host decodes them, their settings and status
//! made as the manager makes them), arbitrary JSON as the spec of a custom resource a
//! live informer watches (created in the real API server, which takes what its schema
//! preserves), scripted registry answers (any status, headers, a body sized, endless
//! or dripped) to a pull, and arbitrary text as a transcript to replay. After each:
//! nothing panicked, the host allocated at most a bounded amount beyond what was
//! passed, and the informer still serves its kind (its canary object cached, its
//! watch working).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::Client;
use kube::api::{DynamicObject, ObjectList};
use kube::core::GroupVersionKind;
use kube::core::watch::WatchEvent;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use wcm_control_plane::TestNamespace;
use wcm_core::kube::decoded::Decoded;
use wcm_core::kube::informer::{Informer, InformerRegistry};
use wcm_core::registry::{Registry, RegistryAuth, RegistryLimits, RegistryOptions};
use wcm_daemon::wasmplugin::{Facts, Pull, WasmPlugin, status_of, status_patch};

use super::{PEAK, reset_peak};

/// What a sequence may make the host allocate beyond a multiple of its inputs: a
/// manifest read to its bound, answers of the API server, the runtime's own.
const SLACK: usize = 24 << 20;
/// How many times its inputs' size a sequence may make the host allocate.
const MULTIPLE: usize = 8;

/// JSON-ish text shaped to cost the most, or to be almost a `WasmPlugin`.
fn json_text() -> impl Strategy<Value = String> {
    let deep = (1usize..400).prop_map(|n| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)));
    let open = (1usize..100_000).prop_map(|n| "[".repeat(n));
    let wide = (1usize..20_000).prop_map(|n| {
        let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{{}}}", keys.join(","))
    });
    prop_oneof![
        any::<String>(),
        deep,
        open,
        wide,
        Just("4294967296".to_string()),
        Just("null".to_string()),
        Just("\"\\u0000\\n\\u001b[2K\"".to_string()),
    ]
}

/// A `WasmPlugin` with `inner` somewhere it may not belong.
fn wasm_plugin_text() -> impl Strategy<Value = String> {
    (json_text(), 0usize..6).prop_map(|(inner, at)| {
        let spec = match at {
            0 => format!("{{\"image\":\"r.example/p:v1\",\"settings\":{{\"x\":{inner}}}}}"),
            1 => format!("{{\"image\":{inner}}}"),
            2 => "{\"image\":\"r.example/p:v1\"}".to_string(),
            _ => inner.clone(),
        };
        let status = match at {
            2 => format!(",\"status\":{{\"rules\":{{\"declared\":{inner},\"granted\":0}}}}"),
            3 => format!(",\"status\":{inner}"),
            _ => String::new(),
        };
        format!(
            "{{\"apiVersion\":\"wasm-controller-manager.io/v1alpha1\",\"kind\":\"WasmPlugin\",\
             \"metadata\":{{\"name\":\"p\",\"namespace\":\"wcm\",\"resourceVersion\":\"7\"}},\
             \"spec\":{spec}{status}}}"
        )
    })
}

/// A registry's answer to every request: a status, headers, a body.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Sized(String),
    Endless,
    Drip,
}

fn answer() -> impl Strategy<Value = Answer> {
    let status = prop_oneof![
        Just(200u16),
        Just(307),
        Just(401),
        Just(404),
        Just(500),
        100u16..600
    ];
    let header = prop_oneof![
        ("Location", "[ -~]{0,120}"),
        ("WWW-Authenticate", "(Bearer|Basic) [ -~]{0,200}"),
        ("Docker-Content-Digest", "sha256:[0-9a-f]{0,64}"),
        ("Content-Length", "[0-9]{1,12}"),
    ]
    .prop_map(|(k, v)| (k.to_string(), v));
    let body = prop_oneof![
        4 => json_text().prop_map(Body::Sized),
        1 => Just(Body::Endless),
        1 => Just(Body::Drip),
    ];
    (status, proptest::collection::vec(header, 0..3), body).prop_map(|(status, headers, body)| {
        Answer {
            status,
            headers,
            body,
        }
    })
}

/// One input from outside.
#[derive(Debug, Clone)]
enum Door {
    WasmPlugins(Vec<String>),
    CustomResource(String),
    Registry(Answer),
    Transcript(String),
}

impl Door {
    fn size(&self) -> usize {
        match self {
            Door::WasmPlugins(items) => items.iter().map(String::len).sum(),
            Door::CustomResource(spec) | Door::Transcript(spec) => spec.len(),
            Door::Registry(answer) => match &answer.body {
                Body::Sized(text) => text.len(),
                _ => 0,
            },
        }
    }
}

fn door() -> impl Strategy<Value = Door> {
    prop_oneof![
        proptest::collection::vec(wasm_plugin_text(), 1..4).prop_map(Door::WasmPlugins),
        json_text().prop_map(Door::CustomResource),
        answer().prop_map(Door::Registry),
        prop_oneof![any::<String>(), json_text()].prop_map(Door::Transcript),
    ]
}

/// Decodes `items` as a list and as watch events of `WasmPlugin`s, as the host does,
/// and makes the settings and status of each that decodes.
fn wasm_plugins(items: &[String]) {
    let list = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{{\"resourceVersion\":\"1\"}},\
         \"items\":[{}]}}",
        items.join(",")
    );
    let Ok(decoded) = serde_json::from_str::<ObjectList<Decoded<WasmPlugin>>>(&list) else {
        return; // not JSON at all: the API server would never send it
    };
    assert_eq!(decoded.items.len(), items.len(), "one item lost another");
    for item in items {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{item}}}");
        let _ = serde_json::from_str::<WatchEvent<Decoded<WasmPlugin>>>(&event);
    }
    for plugin in decoded.items {
        let Decoded::Object(plugin) = plugin else {
            continue;
        };
        if let Some(settings) = &plugin.spec.settings {
            let _ = wcm_core::runtime::settings::of_object(settings, "WasmPlugin p");
        }
        let facts = Facts {
            generation: plugin.metadata.generation,
            paused: plugin.spec.paused,
            pull: &Pull::None,
            running: None,
            row: None,
            refused: None,
        };
        let status = status_of(&facts, plugin.status.as_ref(), Default::default());
        let _ = status_patch(&status);
    }
}

/// Serves `answer` to every request on a loopback port until dropped.
async fn serve(answer: Answer) -> std::io::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(respond(stream, answer.clone()));
        }
    });
    Ok((address, task))
}

async fn respond(stream: tokio::net::TcpStream, answer: Answer) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line).await.is_ok_and(|n| n > 2) {
        line.clear();
    }
    let mut stream = reader.into_inner();
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", answer.status);
    for (key, value) in &answer.headers {
        head.push_str(&format!("{key}: {value}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let _ = match answer.body {
        Body::Sized(text) => stream.write_all(text.as_bytes()).await,
        Body::Endless => loop {
            if let Err(e) = stream.write_all(&[b'x'; 64 << 10]).await {
                break Err(e);
            }
        },
        Body::Drip => loop {
            if let Err(e) = stream.write_all(b" ").await {
                break Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        },
    };
}

/// A pull from a registry answering `answer`, within a short deadline.
async fn pull(answer: Answer) {
    let Ok((address, server)) = serve(answer).await else {
        return;
    };
    let options = RegistryOptions {
        plain_http: [address.clone()].into(),
        limits: RegistryLimits {
            pull_timeout: Duration::from_secs(2),
            ..RegistryLimits::default()
        },
        ..RegistryOptions::default()
    };
    let registry = Registry::with(options).expect("a registry client");
    let reference = wcm_core::registry::reference(&format!("{address}/fuzz/p:v1")).expect("ref");
    let auth = RegistryAuth::Basic("u".into(), "p".into());
    let _ = registry.pull(&reference, &auth, 1 << 20).await;
    server.abort();
}

/// Reads `text` as a transcript, as a replay does.
fn transcript(text: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000001.yaml");
    std::fs::write(&path, text).expect("write");
    let _ = wcm_core::tape::read_transcript(&path);
}

/// Creates a Blob with `spec`, as a raw request (the API server may refuse it).
async fn custom_resource(client: &Client, ns: &str, spec: &str, n: usize) {
    let body = format!(
        "{{\"apiVersion\":\"wcm.test/v1\",\"kind\":\"Blob\",\"metadata\":{{\"name\":\"fuzz-{n}\"}},\
         \"spec\":{spec}}}"
    );
    let path = format!("/apis/wcm.test/v1/namespaces/{ns}/blobs");
    let Ok(request) = http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(body.into_bytes())
    else {
        return;
    };
    let _ = client.request_text(request).await;
}

async fn make(client: &Client, ns: &str, door: Door, n: usize) {
    match door {
        Door::WasmPlugins(items) => wasm_plugins(&items),
        Door::CustomResource(spec) => custom_resource(client, ns, &spec, n).await,
        Door::Registry(answer) => pull(answer).await,
        Door::Transcript(text) => transcript(&text),
    }
}

/// The Blob CRD, a namespace holding a canary Blob, and a live informer of Blobs.
async fn fixture() -> anyhow::Result<(TestNamespace, Arc<Informer>)> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let plane = wcm_control_plane::ControlPlane::shared()?;
    let admin = plane.admin_client().await?;
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "blobs.wcm.test"},
        "spec": {"group": "wcm.test", "scope": "Namespaced",
            "names": {"plural": "blobs", "singular": "blob", "kind": "Blob"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}))?;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(admin);
    let params = kube::api::PatchParams::apply("wcm-tests").force();
    crds.patch("blobs.wcm.test", &params, &kube::api::Patch::Apply(&crd))
        .await?;
    let ns = TestNamespace::create("fuzz-doors").await?;
    let canary = "{\"a\": 1}";
    let created = wcm_control_plane::poll_until(Duration::from_secs(60), || async {
        custom_resource(&ns.client(), ns.name(), canary, 0).await;
        let blobs: kube::Api<DynamicObject> = kube::Api::namespaced_with(
            ns.client(),
            ns.name(),
            &kube::api::ApiResource::from_gvk(&blob()),
        );
        blobs.get("fuzz-0").await.ok()
    })
    .await;
    anyhow::ensure!(created.is_some(), "the Blob CRD was not served");
    let metrics: Arc<wcm_core::metrics::Metrics> = Default::default();
    let registry = InformerRegistry::new(ns.client(), metrics);
    let informer = super::support::access::synced_informer(&registry, &blob(), ns.name()).await?;
    Ok((ns, informer))
}

fn blob() -> GroupVersionKind {
    GroupVersionKind::gvk("wcm.test", "v1", "Blob")
}

/// Runs `cases` sequences of doors' inputs; panics with the first that fails.
pub fn run(runtime: &tokio::runtime::Runtime, cases: u32) {
    let (ns, informer) = runtime.block_on(fixture()).expect("fixture");
    let client = ns.client();
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let count = std::sync::atomic::AtomicUsize::new(1);
    let outcome = runner.run(&proptest::collection::vec(door(), 1..4), |doors| {
        let passed: usize = doors.iter().map(Door::size).sum();
        let before = reset_peak();
        runtime.block_on(async {
            for door in doors.clone() {
                let n = count.fetch_add(1, Ordering::Relaxed);
                make(&client, ns.name(), door, n).await;
            }
        });
        let grown = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        prop_assert!(
            grown <= MULTIPLE * passed + SLACK,
            "{grown} bytes allocated for {passed} bytes of input: {:.200?}",
            doors
        );
        let canary = informer.cache().get(Some(ns.name()), "fuzz-0");
        prop_assert!(canary.is_some(), "the informer lost its canary");
        prop_assert!(informer.problem().is_none(), "{:?}", informer.problem());
        Ok(())
    });
    runtime.block_on(async move { drop(ns) });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
