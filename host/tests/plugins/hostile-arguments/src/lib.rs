//! A hostile test plugin. It watches ConfigMaps labelled `wcm.test/hostile-arguments`
//! and, for each, calls every host import with one argument of `mib` MiB (the
//! ConfigMap's data, default 48): a name, a namespace, a kind, a label selector, label
//! keys and values and a million of them, finalizers, an Event's reason and note,
//! JSON bodies shaped to cost the most to parse (a flat array, a wide object, deep
//! nesting), a patch, a status, delete preconditions, metric names and values, a log
//! message of control characters and its fields. It writes each call's error code into
//! the ConfigMap's `results` (`call=code`, one per line), a `1` beside the code when
//! the message names the size bound, and labels it `wcm.test/done=true`.
//!
//! A ConfigMap with `loop: N` instead has it count, for N seconds, the ConfigMaps it
//! watches: each time first with a selector of 100,000 requirements every object
//! meets (which the host must refuse before it costs anything), then with the
//! costliest one a plugin may pass (32 such requirements); it labels the ConfigMap
//! `wcm.test/counts=<how many counts>` and `wcm.test/huge=<the first one's answer>`.
//! ConfigMaps with neither key are left alone.

use k8s_openapi::api::core::v1::ConfigMap;
use wasm_controller_sdk::wit::wcm::controller::cluster as host;
use wasm_controller_sdk::wit::wcm::controller::log as host_log;
use wasm_controller_sdk::wit::wcm::controller::metrics as host_metrics;
use wasm_controller_sdk::{
    Action, Controller, Error, EventType, Failure, Gvk, ObjectRef, Registration, Request, Verb,
    Watch, cluster, config, export_controller,
};

/// The plugin.
pub struct HostileArguments;

const LABEL: &str = "wcm.test/hostile-arguments";

impl Controller for HostileArguments {
    fn registration() -> Registration {
        // A test keeps it to its own namespace with settings `namespace: ...`.
        let settings: Option<serde_json::Value> = config::settings().ok().flatten();
        let namespace = settings
            .as_ref()
            .and_then(|s| s["namespace"].as_str().map(String::from));
        let watch = Watch::all::<ConfigMap>().labels(LABEL);
        let watch = match &namespace {
            Some(ns) => watch.in_namespace(ns),
            None => watch,
        };
        Registration::new("hostile-arguments", "0.1.0")
            .watch(watch)
            .permit::<ConfigMap>(&[
                Verb::Patch,
                Verb::Apply,
                Verb::Create,
                Verb::Update,
                Verb::Delete,
                Verb::PatchStatus,
            ])
            .counter("calls", "Calls made", &["call"])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let cm: ConfigMap = match cluster::get(req.namespace.as_deref(), &req.name) {
            Ok(cm) => cm,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let labels = cm.metadata.labels.clone().unwrap_or_default();
        if labels.contains_key("wcm.test/done") {
            return Ok(Action::Done);
        }
        let data = cm.data.clone().unwrap_or_default();
        let me = ObjectRef::of(&cm);
        if let Some(seconds) = data.get("loop").and_then(|s| s.parse().ok()) {
            let (counts, huge) = count_for(&me, seconds)?;
            let counts = counts.to_string();
            let labels = [
                ("wcm.test/counts", counts.as_str()),
                ("wcm.test/huge", &huge),
            ];
            cluster::patch_labels(&me, &labels, &[])?;
            return Ok(Action::Done);
        }
        let Some(mib) = data.get("mib").and_then(|m| m.parse::<usize>().ok()) else {
            return Ok(Action::Done);
        };
        let only: Vec<String> = (data.get("only").map(String::as_str).unwrap_or_default())
            .split(',')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        let results = call_everything(&me, mib << 20, &only);
        let text: Vec<String> = results
            .iter()
            .map(|(call, outcome)| format!("{call}={outcome}"))
            .collect();
        let patch = serde_json::json!({"data": {"results": text.join("\n")}});
        cluster::merge_patch(&me, &patch)?;
        cluster::patch_labels(&me, &[("wcm.test/done", "true")], &[])?;
        Ok(Action::Done)
    }
}

/// What one call answered: its error code, and `1` if the message names the bound.
fn outcome<T>(result: Result<T, Error>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => {
            let bound = e.message.contains("more than") && e.message.len() < 4096;
            let code = format!("{:?}", e.code).to_lowercase();
            let code = code.rsplit("::").next().unwrap_or_default().to_string();
            format!("{code}{}", if bound { " 1" } else { "" })
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

/// `n` bytes of `unit` repeated.
fn filled(unit: &str, n: usize) -> String {
    unit.repeat(n / unit.len())
}

/// A selector of `terms` requirements no object fails.
fn always_true(terms: usize) -> String {
    let terms: Vec<String> = (0..terms).map(|i| format!("!absent-{i}")).collect();
    terms.join(",")
}

/// Counts the watched ConfigMaps of `me`'s namespace again and again for `seconds`,
/// each time with a selector of 100,000 requirements and then with one of 32; returns
/// how many counts of the second kind it made, and what the first kind answered.
fn count_for(me: &ObjectRef, seconds: u64) -> Result<(u64, String), Error> {
    let (huge, costliest) = (always_true(100_000), always_true(32));
    let ns = me.namespace.as_deref();
    let started = std::time::Instant::now();
    let (mut counts, mut answer) = (0, String::new());
    while started.elapsed() < std::time::Duration::from_secs(seconds) {
        answer = outcome(host::count(&config_maps(), ns, Some(&huge)));
        answer = answer.replace(' ', "-");
        host::count(&config_maps(), ns, Some(&costliest))?;
        counts += 1;
    }
    Ok((counts, answer))
}

/// One host call with arguments of `n` bytes; returns what it answered.
type Call = fn(&ObjectRef, usize) -> String;

/// The calls, by name.
const CALLS: [(&str, Call); 18] = [
    ("get-name", |me, n| {
        outcome(host::get(&named(me, filled("n", n))))
    }),
    ("get-group", |me, n| {
        let kind = Gvk {
            group: filled("g", n),
            ..config_maps()
        };
        outcome(host::get(&ObjectRef { kind, ..me.clone() }))
    }),
    ("list", |me, n| {
        let selector = filled("!a,", n);
        outcome(host::list(
            &config_maps(),
            me.namespace.as_deref(),
            Some(&selector),
        ))
    }),
    ("count", |me, n| {
        let selector = filled("!a,", n);
        outcome(host::count(
            &config_maps(),
            me.namespace.as_deref(),
            Some(&selector),
        ))
    }),
    ("label-key", |me, n| {
        outcome(host::patch_labels(me, &[(filled("k", n), "v".into())], &[]))
    }),
    ("labels-many", |me, n| {
        let many: Vec<(String, String)> = (0..(n / 64))
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        outcome(host::patch_labels(me, &many, &[]))
    }),
    ("finalizer", |me, n| {
        outcome(host::patch_finalizers(me, &[filled("f", n)], &[]))
    }),
    ("event-reason", |me, n| {
        outcome(host::record_event(&event(me, filled("R", n), "n")))
    }),
    ("event-note", |me, n| {
        let note = filled("x", n);
        outcome(host::record_event(&event(me, "Big".into(), &note)))
    }),
    ("apply-array", |_, n| {
        outcome(host::apply(&format!("[{}0]", filled("0,", n)), false))
    }),
    ("create-object", |_, n| {
        outcome(host::create(&format!(
            "{{{}\"z\":0}}",
            filled("\"a\":0,", n)
        )))
    }),
    ("update-nested", |_, n| {
        outcome(host::update(&filled("[", n)))
    }),
    ("patch", |me, n| {
        outcome(host::patch(
            me,
            host::PatchType::Merge,
            &wide_patch(n),
            None,
        ))
    }),
    ("patch-status", |me, n| {
        outcome(host::patch_status(me, &wide_patch(n)))
    }),
    ("delete", |me, n| {
        let options = host::DeleteOptions {
            propagation: host::Propagation::Background,
            uid: Some(filled("u", n)),
            resource_version: None,
        };
        outcome(host::delete(&named(me, "nothing".into()), &options))
    }),
    ("metric-name", |_, n| {
        outcome(host_metrics::add(&filled("m", n), &[], 1.0))
    }),
    ("metric-value", |_, n| {
        outcome(host_metrics::add("calls", &[filled("v", n)], 1.0))
    }),
    ("log", |_, n| {
        let message = filled("\u{1}", n);
        host_log::log(
            host_log::Level::Info,
            &message,
            &[("k".into(), message.clone())],
        );
        "ok".into()
    }),
];

/// Makes every call, or those `only` names, with arguments of `n` bytes.
fn call_everything(me: &ObjectRef, n: usize, only: &[String]) -> Vec<(&'static str, String)> {
    (CALLS.iter())
        .filter(|(call, _)| only.is_empty() || only.iter().any(|o| o == call))
        .map(|(call, make)| (*call, make(me, n)))
        .collect()
}

/// A ConfigMap of `me`'s namespace named `name`.
fn named(me: &ObjectRef, name: String) -> ObjectRef {
    ObjectRef {
        kind: config_maps(),
        namespace: me.namespace.clone(),
        name,
    }
}

/// An Event about `me`.
fn event(me: &ObjectRef, reason: String, note: &str) -> host::Event {
    host::Event {
        regarding: me.clone(),
        related: None,
        type_: EventType::Normal,
        reason,
        action: String::new(),
        note: note.into(),
    }
}

/// A merge patch of `n` bytes: data with very many keys.
fn wide_patch(n: usize) -> String {
    format!("{{\"data\":{{{}\"z\":\"0\"}}}}", filled("\"a\":\"0\",", n))
}

export_controller!(HostileArguments);
