//! The host's boundary under sequences of hostile calls: arbitrary strings, and
//! arguments of up to several MiB shaped to cost the most (flat JSON arrays, wide
//! objects, deep nesting, selectors of many terms, long lists of labels, control
//! characters), against the real API server and a cache of 2,000 ConfigMaps. After each
//! sequence: nothing panicked, every call answered, the host allocated at most a
//! bounded multiple of what the calls passed, no call kept the cache's lock from the
//! informer for long, and `/metrics` still parses (the Prometheus project's parser). A
//! short run in `make test`; `make fuzz` runs long (`WCM_FUZZ_CASES`). The doors other
//! than a plugin's arguments (`WasmPlugin`s, custom resources, registries, transcripts)
//! are driven the same way (`fuzz_doors`).

mod fuzz_doors;
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::imports::Cluster;
use crate::support::imports::Metrics;
use futures::StreamExt;
use kube::api::{Api, PostParams};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use wcm_control_plane::TestNamespace;
use wcm_core::bindings::v0_3::wcm::controller::cluster::{
    DeleteOptions, Event, PatchType, Propagation,
};
use wcm_core::bindings::v0_3::wcm::controller::log::{Host as Log, Level};
use wcm_core::bindings::v0_3::wcm::controller::types::{EventType, Gvk, ObjectRef};
use wcm_core::budget::Budget;
use wcm_core::contract::{MetricDeclaration, MetricKind};
use wcm_core::kube::cache::CachedObject;
use wcm_core::kube::informer::Informer;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::plugin::PluginMetrics;
use wcm_core::runtime::HostState;

/// The system allocator, counting the bytes held and their peak since the last reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are
// kept beside it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        // SAFETY: as the caller's contract for `alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Starts counting the peak from what is held now; returns that.
fn reset_peak() -> usize {
    let held = HELD.load(Ordering::Relaxed);
    PEAK.store(held, Ordering::Relaxed);
    held
}

/// ConfigMaps in the cache the calls read.
const CACHED: usize = 2_000;
/// Bytes a sequence may make the host allocate beyond a multiple of its arguments: the
/// API server's answers, the informer's events meanwhile, the runtime's own.
const SLACK: usize = 8 << 20;
/// How many times its arguments' size a sequence may make the host allocate.
const MULTIPLE: usize = 8;
/// The longest the informer may wait for its cache's lock while calls run.
const LOCK_BOUND: Duration = Duration::from_millis(100);

/// An argument of `n` bytes of a hostile shape.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Repeated(char),
    FlatArray,
    WideObject,
    Nested,
    Selector,
    Control,
}

fn shaped(shape: Shape, n: usize) -> String {
    let fill = |unit: &str| unit.repeat(n / unit.len().max(1));
    match shape {
        Shape::Repeated(c) => std::iter::repeat_n(c, n / c.len_utf8()).collect(),
        Shape::FlatArray => format!("[{}0]", fill("0,")),
        Shape::WideObject => format!("{{{}\"z\":0}}", fill("\"a\":0,")),
        Shape::Nested => fill("["),
        Shape::Selector => fill("!a,"),
        Shape::Control => fill("\u{1b}[2K\n"),
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        any::<char>().prop_map(Shape::Repeated),
        Just(Shape::FlatArray),
        Just(Shape::WideObject),
        Just(Shape::Nested),
        Just(Shape::Selector),
        Just(Shape::Control),
    ]
}

/// A hostile argument: arbitrary text, or a shape of a size up to 4 MiB.
fn argument() -> impl Strategy<Value = String> {
    let sizes = prop_oneof![
        Just(0),
        1usize..2048,
        Just(64 << 10),
        Just(1 << 20),
        Just(4 << 20)
    ];
    prop_oneof![
        any::<String>(),
        "[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?",
        (shape(), sizes).prop_map(|(s, n)| shaped(s, n)),
    ]
}

/// One call of the contract with hostile arguments.
#[derive(Clone)]
enum Call {
    Get(String, String),
    List(Option<String>, Option<u32>),
    Count(Option<String>),
    PatchLabels(Vec<(String, String)>, usize),
    Finalizers(Vec<String>),
    Event(String, String),
    Apply(String),
    Create(String),
    Update(String),
    Patch(String, bool, Option<String>),
    PatchStatus(String),
    Delete(String),
    Metric(String, Vec<String>),
    Log(String, Vec<(String, String)>),
}

fn labels() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec((argument(), argument()), 0..4)
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (argument(), argument()).prop_map(|(n, g)| Call::Get(n, g)),
        (
            proptest::option::of(argument()),
            proptest::option::of(0u32..100)
        )
            .prop_map(|(s, l)| Call::List(s, l)),
        proptest::option::of(argument()).prop_map(Call::Count),
        (labels(), prop_oneof![Just(0usize), Just(100_000)])
            .prop_map(|(l, many)| Call::PatchLabels(l, many)),
        proptest::collection::vec(argument(), 0..20).prop_map(Call::Finalizers),
        (argument(), argument()).prop_map(|(r, n)| Call::Event(r, n)),
        argument().prop_map(Call::Apply),
        argument().prop_map(Call::Create),
        argument().prop_map(Call::Update),
        (argument(), any::<bool>(), proptest::option::of(argument()))
            .prop_map(|(p, json, s)| Call::Patch(p, json, s)),
        argument().prop_map(Call::PatchStatus),
        argument().prop_map(Call::Delete),
        (argument(), proptest::collection::vec(argument(), 0..3))
            .prop_map(|(n, l)| Call::Metric(n, l)),
        (argument(), labels()).prop_map(|(m, f)| Call::Log(m, f)),
    ]
}

/// A call as a failure names it: its kind, its arguments' size and their start, so a
/// report of a 4 MiB argument is a line, not 4 MiB.
impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = |s: &str| s.chars().take(24).collect::<String>();
        let first = match self {
            Call::Get(a, _) | Call::Event(a, _) | Call::Apply(a) | Call::Create(a) => start(a),
            Call::Update(a) | Call::PatchStatus(a) | Call::Delete(a) | Call::Patch(a, ..) => {
                start(a)
            }
            Call::Metric(a, _) | Call::Log(a, _) => start(a),
            Call::List(s, _) | Call::Count(s) => s.as_deref().map(start).unwrap_or_default(),
            Call::PatchLabels(..) | Call::Finalizers(_) => String::new(),
        };
        let kind = match self {
            Call::Get(..) => "get",
            Call::List(..) => "list",
            Call::Count(..) => "count",
            Call::PatchLabels(..) => "patch-labels",
            Call::Finalizers(..) => "patch-finalizers",
            Call::Event(..) => "record-event",
            Call::Apply(..) => "apply",
            Call::Create(..) => "create",
            Call::Update(..) => "update",
            Call::Patch(..) => "patch",
            Call::PatchStatus(..) => "patch-status",
            Call::Delete(..) => "delete",
            Call::Metric(..) => "metrics",
            Call::Log(..) => "log",
        };
        write!(f, "{kind}({} bytes, {first:?}…)", self.size())
    }
}

impl Call {
    /// The bytes of its arguments: what the guest passed.
    fn size(&self) -> usize {
        let pairs =
            |l: &[(String, String)]| l.iter().map(|(a, b)| a.len() + b.len()).sum::<usize>();
        match self {
            Call::Get(a, b) | Call::Event(a, b) => a.len() + b.len(),
            Call::List(s, _) | Call::Count(s) => s.as_ref().map_or(0, String::len),
            Call::PatchLabels(l, many) => pairs(l) + many * 8,
            Call::Finalizers(f) | Call::Metric(_, f) => f.iter().map(String::len).sum(),
            Call::Apply(a) | Call::Create(a) | Call::Update(a) | Call::PatchStatus(a) => a.len(),
            Call::Patch(p, _, s) => p.len() + s.as_ref().map_or(0, String::len),
            Call::Delete(u) => u.len(),
            Call::Log(m, f) => m.len() + pairs(f),
        }
    }
}

fn config_maps() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

/// Makes `call`; a call that is answered at all is all that is asked of it here.
async fn make(state: &mut HostState, ns: &str, call: Call) {
    let me = |name: String| ObjectRef {
        kind: config_maps(),
        namespace: Some(ns.into()),
        name,
    };
    let cm = || me("cm-0".into());
    match call {
        Call::Get(name, group) => {
            let _ = state.get(me(name)).await;
            let kind = Gvk {
                group,
                ..config_maps()
            };
            let _ = state.get(ObjectRef { kind, ..cm() }).await;
        }
        Call::List(selector, None) => {
            drop(state.list(config_maps(), Some(ns.into()), selector).await)
        }
        Call::List(selector, Some(limit)) => {
            let _ = state
                .list_first(config_maps(), Some(ns.into()), selector, limit)
                .await;
        }
        Call::Count(selector) => drop(state.count(config_maps(), Some(ns.into()), selector).await),
        Call::PatchLabels(mut labels, many) => {
            labels.extend((0..many).map(|i| (format!("k{i}"), String::new())));
            let _ = state.patch_labels(cm(), labels, vec![]).await;
        }
        Call::Finalizers(add) => drop(state.patch_finalizers(cm(), add, vec![]).await),
        Call::Event(reason, note) => {
            let event = Event {
                regarding: cm(),
                related: None,
                type_: EventType::Normal,
                reason: reason.clone(),
                action: reason,
                note,
            };
            let _ = state.record_event(event).await;
        }
        Call::Apply(body) => drop(state.apply(body, false).await),
        Call::Create(body) => drop(state.create(body).await),
        Call::Update(body) => drop(state.update(body).await),
        Call::Patch(body, json, sub) => {
            let kind = if json {
                PatchType::Json
            } else {
                PatchType::Merge
            };
            let _ = state.patch(cm(), kind, body, sub).await;
        }
        Call::PatchStatus(body) => drop(state.patch_status(cm(), body).await),
        Call::Delete(uid) => {
            let options = DeleteOptions {
                propagation: Propagation::Background,
                uid: Some(uid),
                resource_version: None,
            };
            let _ = state.delete(me("absent".into()), options).await;
        }
        Call::Metric(name, labels) => {
            let _ = Metrics::add(state, name, labels.clone(), 1.0).await;
            let _ = Metrics::set(state, "level".into(), labels, 1.0).await;
        }
        Call::Log(message, fields) => Log::log(state, Level::Warn, message, fields).await,
    }
}

/// Writes the probe object into `informer`'s cache again and again, as the informer
/// would on an event, and keeps the longest it waited for the cache's lock.
fn probe_lock(informer: Arc<Informer>, stop: Arc<AtomicBool>, longest: Arc<AtomicU64>) {
    let object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "zz-lock-probe", "namespace": informer.scope().namespace},
    }))
    .expect("probe object");
    let probe = Arc::new(CachedObject::from_dynamic(object).expect("serialisable"));
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        informer.cache().apply(probe.clone());
        let waited = started.elapsed().as_micros() as u64;
        longest.fetch_max(waited, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Fixture {
    state: HostState,
    informer: Arc<Informer>,
    metrics: Arc<wcm_core::metrics::Metrics>,
}

async fn fixture(ns: &TestNamespace) -> anyhow::Result<Fixture> {
    let client = ns.client();
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), ns.name());
    let creates = (0..CACHED).map(|i| {
        let api = api.clone();
        async move {
            let cm = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("cm-{i}"), "labels": {"app": "web", "i": i.to_string()}},
                "data": {"k": "v"},
            }))?;
            api.create(&PostParams::default(), &cm).await?;
            anyhow::Ok(())
        }
    });
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(creates)
        .buffer_unordered(32)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let metrics: Arc<wcm_core::metrics::Metrics> = Default::default();
    let mut budget = Budget::default();
    (budget.api.qps, budget.api.burst) = (1_000.0, 1_000);
    let gate = (LeaderGate::always_open(), budget);
    let (access, informer) = support::access::config_map_access(
        "boundary-fuzz",
        ns.name(),
        client,
        gate,
        metrics.clone(),
    )
    .await?;
    let declared = [MetricDeclaration {
        name: "level".into(),
        help: "A level".into(),
        kind: MetricKind::Gauge,
        labels: vec!["x".into()],
        buckets: vec![],
    }];
    let plugin_metrics = Arc::new(PluginMetrics::new("boundary-fuzz", &declared, 500));
    metrics.plugin_metrics.insert(plugin_metrics.clone());
    let access = access.with_metrics(plugin_metrics);
    let state = HostState::for_reconcile(Arc::new(access), "key".into(), 64 << 20);
    Ok(Fixture {
        state,
        informer,
        metrics,
    })
}

/// One fuzz test at a time: each counts every allocation of the process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How many sequences a fuzz test runs: `WCM_FUZZ_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("WCM_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

#[support::test(offline)]
fn sequences_of_hostile_outside_inputs_cost_the_host_a_bounded_amount() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    fuzz_doors::run(&runtime, cases(16));
}

#[support::test(offline)]
fn sequences_of_hostile_calls_cost_the_host_a_bounded_multiple_of_their_size() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    let cases = cases(24);
    let ns = runtime
        .block_on(TestNamespace::create("boundary"))
        .expect("namespace");
    let fixture = runtime.block_on(fixture(&ns)).expect("fixture");
    let Fixture {
        state,
        informer,
        metrics,
    } = fixture;
    let (stop, longest) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let probe = {
        let (informer, stop, longest) = (informer.clone(), stop.clone(), longest.clone());
        std::thread::spawn(move || probe_lock(informer, stop, longest))
    };
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let state = std::sync::Mutex::new(state);
    let outcome = runner.run(&proptest::collection::vec(call(), 1..6), |calls| {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        let passed: usize = calls.iter().map(Call::size).sum();
        longest.store(0, Ordering::Relaxed);
        let before = reset_peak();
        runtime.block_on(async {
            for call in calls.clone() {
                make(&mut state, ns.name(), call).await;
            }
        });
        let grown = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        prop_assert!(
            grown <= MULTIPLE * passed + SLACK,
            "{grown} bytes allocated for {passed} bytes of arguments: {:?}",
            calls
                .iter()
                .map(|c| format!("{:.80?}", c))
                .collect::<Vec<_>>()
        );
        let waited = Duration::from_micros(longest.load(Ordering::Relaxed));
        prop_assert!(
            waited < LOCK_BOUND,
            "the informer waited {waited:?} for the cache's lock"
        );
        let parsed = support::check_metrics(&metrics.encode());
        prop_assert!(parsed.is_ok(), "/metrics: {parsed:?}");
        Ok(())
    });
    stop.store(true, Ordering::Relaxed);
    let _ = probe.join();
    runtime.block_on(async move { drop(ns) });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
