//! A hostile test plugin. It watches ConfigMaps labelled `wcm.test/misbehave` and, for
//! each, does what the ConfigMap's `behaviour` key says:
//!
//! - `trap` panics, `loop` spins forever, `grow` allocates until memory runs out,
//!   `recurse` recurses until its stack in linear memory overflows, `recurse-native`
//!   until WebAssembly's own call stack is exhausted, `handles` holds host handles
//!   (WASI pollables) until the host's bound refuses more;
//! - `sleep` labels it `wcm.test/started=true`, waits in a host call (WASI's clock)
//!   for `seconds` (default 3) and then acts as `ok`;
//! - `calls` makes 100,000 host calls (`get` of itself), then acts as `ok`;
//! - `list-all` lists every ConfigMap it watches (the test makes that answer too
//!   large) and fails with the host's error;
//! - `log-flood` writes a 10 MB log line, 100,000 log lines and 10 MB to stderr,
//!   then acts as `ok`;
//! - `bad-names` patches objects whose names and namespaces a host must refuse or
//!   the API server cannot find, and labels itself with how many of each it got:
//!   `wcm.test/refused` (`invalid`) and `wcm.test/not-found`;
//! - `events` records 2,000 Events about itself and one about a Secret it does not
//!   watch, then labels itself `wcm.test/event-forbidden=true` if that one was
//!   refused as `forbidden`;
//! - `requeue` asks to run again at once, forever;
//! - `bump` adds one to its own label `wcm.test/bumps` on every reconcile, so each of
//!   its writes wakes it again, forever;
//! - `long-error` fails with a 10 MB error message;
//! - `writes` patches its own labels 30 times in one reconcile (the test sets a low
//!   API rate), then acts as `ok` (once: a handled ConfigMap is left alone);
//! - `instance-calls` counts the reconciles its instance has served (a global) and
//!   appends that number to its own label `wcm.test/history` (`1.2.3...`), which wakes
//!   it again, until the history has 6 entries; with `leak-kib` it first leaks that
//!   much memory, with `trap-at: N` it panics on its instance's N-th call instead —
//!   so a test sees when the host reuses and when it replaces an instance;
//! - `ok` labels the ConfigMap `wcm.test/handled=true` so a test can see the plugin
//!   works for that key.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasm_controller_sdk::{
    Action, Controller, Error, ErrorCode, EventType, Failure, ObjectRef, Registration, Request,
    Verb, Watch, cluster, export_controller, log,
};

/// The plugin.
pub struct Misbehaving;

impl Controller for Misbehaving {
    fn registration() -> Registration {
        Registration::new("misbehaving", "0.2.0")
            .watch(Watch::all::<ConfigMap>().labels("wcm.test/misbehave"))
            .permit::<ConfigMap>(&[Verb::Patch])
            .max_concurrent_reconciles(4)
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let cm: ConfigMap = match cluster::get(req.namespace.as_deref(), &req.name) {
            Ok(cm) => cm,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let data = cm.data.clone().unwrap_or_default();
        let target = ObjectRef::of(&cm);
        match data.get("behaviour").map(String::as_str) {
            Some("trap") => panic!("deliberate panic in reconcile of {}", req.name),
            Some("loop") => spin(),
            Some("grow") => grow(),
            Some("recurse") => Ok(Action::RequeueAfter(recurse(black_box(1)))),
            Some("recurse-native") => Ok(Action::RequeueAfter(recurse_native(black_box(1)))),
            Some("handles") => hold_handles(),
            Some("sleep") => {
                cluster::patch_labels(&target, &[("wcm.test/started", "true")], &[])?;
                let seconds = data.get("seconds").and_then(|s| s.parse().ok());
                std::thread::sleep(std::time::Duration::from_secs(seconds.unwrap_or(3)));
                handled(&target)
            }
            Some("calls") => {
                for _ in 0..100_000 {
                    cluster::get_json(&target)?;
                }
                handled(&target)
            }
            Some("list-all") => {
                let all: Vec<ConfigMap> = cluster::list(None, Some("wcm.test/misbehave"))?;
                log::info(&format!("listed {} ConfigMaps", all.len()));
                handled(&target)
            }
            Some("log-flood") => {
                log::info(&"x".repeat(10 << 20));
                log::info("done\n2026-12-03T00:00:00.000000Z  INFO wcm_daemon: forged by a plugin");
                for i in 0..100_000 {
                    log::info(&format!("flood line {i}"));
                }
                eprint!("{}", "e".repeat(10 << 20));
                handled(&target)
            }
            Some("bad-names") => bad_names(&cm, &target),
            Some("instance-calls") => instance_calls(&cm, &target),
            Some("events") => events(&target),
            Some("requeue") => Ok(Action::RequeueAfter(0)),
            Some("bump") => {
                let labels = cm.metadata.labels.as_ref();
                let bumps = labels.and_then(|l| l.get("wcm.test/bumps"));
                let next = bumps.and_then(|b| b.parse::<u64>().ok()).unwrap_or(0) + 1;
                let next = next.to_string();
                cluster::patch_labels(&target, &[("wcm.test/bumps", next.as_str())], &[])?;
                Ok(Action::Done)
            }
            Some("long-error") => Err(Error::other("e".repeat(10 << 20)).into()),
            Some("writes")
                if !cm
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key("wcm.test/handled")) =>
            {
                for i in 0..30 {
                    let value = i.to_string();
                    cluster::patch_labels(&target, &[("wcm.test/write", value.as_str())], &[])?;
                }
                handled(&target)
            }
            _ => handled(&target),
        }
    }
}

/// Reconciles this instance has served (fresh instances start at 0).
static INSTANCE_CALLS: AtomicU32 = AtomicU32::new(0);
/// Entries in `wcm.test/history` after which `instance-calls` stops.
const HISTORY_ENTRIES: usize = 6;

fn instance_calls(cm: &ConfigMap, target: &ObjectRef) -> Result<Action, Failure> {
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    let history = labels.get("wcm.test/history").cloned().unwrap_or_default();
    if history.split('.').filter(|e| !e.is_empty()).count() >= HISTORY_ENTRIES {
        return Ok(Action::Done); // finished: not counted, so a later host starts clean
    }
    let call = INSTANCE_CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    let data = cm.data.clone().unwrap_or_default();
    if let Some(kib) = data.get("leak-kib").and_then(|k| k.parse::<usize>().ok()) {
        std::mem::forget(black_box(vec![1u8; kib << 10]));
    }
    if data
        .get("trap-at")
        .is_some_and(|at| *at == call.to_string())
    {
        panic!("deliberate panic on call {call} of this instance");
    }
    let history = match history.is_empty() {
        true => call.to_string(),
        false => format!("{history}.{call}"),
    };
    cluster::patch_labels(target, &[("wcm.test/history", history.as_str())], &[])?;
    Ok(Action::Done)
}

fn handled(target: &ObjectRef) -> Result<Action, Failure> {
    cluster::patch_labels(target, &[("wcm.test/handled", "true")], &[])?;
    Ok(Action::Done)
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn grow() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(black_box(vec![1u8; 1 << 20]));
    }
}

/// Recurses with a frame the optimiser cannot remove until the stack runs out.
#[allow(unconditional_recursion)] // the point: it ends only in a stack overflow
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    recurse(black_box(depth + 1)) + frame[(depth % 64) as usize]
}

/// Recurses with nothing in linear memory, so each frame is on WebAssembly's own
/// call stack, which the runtime bounds.
#[allow(unconditional_recursion)] // the point: it ends only in a stack overflow
fn recurse_native(depth: u64) -> u64 {
    black_box(recurse_native(black_box(depth + 1))).wrapping_add(depth)
}

/// Creates WASI pollables and never drops them: each is a host handle.
fn hold_handles() -> ! {
    loop {
        std::mem::forget(wasip2::clocks::monotonic_clock::subscribe_duration(1));
    }
}

/// Names and namespaces the host must refuse before any request, and a namespace
/// the API server does not have.
fn bad_names(cm: &ConfigMap, target: &ObjectRef) -> Result<Action, Failure> {
    let ns = target.namespace.clone();
    let victim = cm.data.as_ref().and_then(|d| d.get("victim")).cloned();
    let victim = victim.unwrap_or_else(|| "victim".into());
    let long = "n".repeat(300);
    let names = [
        format!("{victim}?fieldManager=spoofed&x="),
        format!("{victim}/status"),
        "..".to_string(),
        String::new(),
        long,
    ];
    let (mut refused, mut not_found) = (0, 0);
    for name in &names {
        let obj = ObjectRef::new::<ConfigMap>(ns.as_deref(), name);
        match cluster::patch_labels(&obj, &[("wcm.test/spoofed", "true")], &[]) {
            Err(Error {
                code: ErrorCode::Invalid,
                message,
                ..
            }) => {
                log::info(&format!("refused as it should be: {message}"));
                refused += 1;
            }
            other => log::error(&format!("not refused: {name:?}: {other:?}")),
        }
    }
    for namespace in ["Not_A_Namespace", "no-such-namespace-wcm-test"] {
        let obj = ObjectRef::new::<ConfigMap>(Some(namespace), &victim);
        match cluster::patch_labels(&obj, &[("wcm.test/spoofed", "true")], &[]) {
            Err(e) if e.code == ErrorCode::Invalid => refused += 1,
            Err(e) if e.is_not_found() => not_found += 1,
            other => log::error(&format!("namespace {namespace}: {other:?}")),
        }
    }
    let (refused, not_found) = (refused.to_string(), not_found.to_string());
    let labels = [
        ("wcm.test/refused", refused.as_str()),
        ("wcm.test/not-found", not_found.as_str()),
    ];
    cluster::patch_labels(target, &labels, &[])?;
    Ok(Action::Done)
}

/// An Event flood about one object, and an Event about a kind it does not watch.
fn events(target: &ObjectRef) -> Result<Action, Failure> {
    for i in 0..2000 {
        let note = format!("flood {i}");
        cluster::record_event(target, EventType::Normal, "Flood", &note)?;
    }
    let secret = ObjectRef::new::<Secret>(target.namespace.as_deref(), "anything");
    let forbidden = matches!(
        cluster::record_event(&secret, EventType::Normal, "Spy", "not mine"),
        Err(e) if e.is_forbidden()
    );
    let value = if forbidden { "true" } else { "false" };
    cluster::patch_labels(target, &[("wcm.test/event-forbidden", value)], &[])?;
    Ok(Action::Done)
}

export_controller!(Misbehaving);
