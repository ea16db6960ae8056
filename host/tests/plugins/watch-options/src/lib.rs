//! Test plugin for contract 0.3's watch options: it watches ConfigMaps labelled
//! `wcm.test/step` in the two namespaces `wcm-watch-a` and `wcm-watch-b` only, except
//! those named `ignored`
//! (a field selector), holding their metadata only, and wakes on creates, deletes and
//! label changes, not on data changes. Every reconcile records an Event about the
//! ConfigMap whose reason names the step label it was given (`Seen1`, `Seen2`; Events
//! of one reason are one series, whatever their note) and whose note says whether it
//! was given data (`data=absent|present`), so tests see which changes woke it and that
//! the cache held no data. Its own writes show the predicate too: the first reconcile labels the
//! ConfigMap `wcm.test/seen` (a label change: it is woken again), the second applies a
//! data key (not a label change: it is not woken a third time).

use k8s_openapi::api::core::v1::ConfigMap;
use wasm_controller_sdk::{
    Action, Controller, EventType, Failure, ObjectRef, Predicate, Registration, Request, Verb,
    Watch, cluster, config, export_controller,
};

/// The namespaces the plugin watches without settings (a third, `wcm-watch-c`, it
/// must not see); settings `{"namespaces": [...]}` name others.
pub const NAMESPACES: [&str; 2] = ["wcm-watch-a", "wcm-watch-b"];

/// The operator's settings this plugin understands.
#[derive(serde::Deserialize)]
struct Settings {
    namespaces: Vec<String>,
}
/// The label whose value each `Seen` Event reports.
pub const STEP: &str = "wcm.test/step";
/// The label the plugin sets on first sight.
pub const SEEN: &str = "wcm.test/seen";

/// The plugin.
pub struct WatchOptions;

impl Controller for WatchOptions {
    fn registration() -> Registration {
        let configured = config::settings::<Settings>().ok().flatten();
        let namespaces =
            configured.map_or_else(|| NAMESPACES.map(str::to_string).to_vec(), |s| s.namespaces);
        let names: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        Registration::new("watch-options", "0.1.0")
            .watch(
                Watch::all::<ConfigMap>()
                    .in_namespaces(&names)
                    .labels(STEP)
                    .fields("metadata.name!=ignored")
                    .metadata_only()
                    .when(Predicate::LabelsChanged),
            )
            .permit::<ConfigMap>(&[Verb::Patch, Verb::Apply])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let Some(namespace) = req.namespace.as_deref() else {
            return Ok(Action::Done);
        };
        let cm = match cluster::get::<ConfigMap>(Some(namespace), &req.name) {
            Ok(cm) => cm,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let label = |key: &str| (cm.metadata.labels.as_ref()).and_then(|l| l.get(key).cloned());
        let step = label(STEP).unwrap_or_default();
        let data = match cm.data.is_some() || cm.binary_data.is_some() {
            true => "present",
            false => "absent",
        };
        let step: String = step.chars().filter(char::is_ascii_digit).take(8).collect();
        let target = ObjectRef::new::<ConfigMap>(Some(namespace), &req.name);
        let reason = format!("Seen{step}");
        cluster::record_event(&target, EventType::Normal, &reason, &format!("data={data}"))?;
        if label(SEEN).is_none() {
            cluster::patch_labels(&target, &[(SEEN, "true")], &[])?;
        } else {
            let mut mine = ConfigMap::default();
            mine.metadata.name = Some(req.name.clone());
            mine.metadata.namespace = Some(namespace.to_string());
            // Its own label again: the label and this data share one field manager,
            // and an apply without a field it owns removes that field.
            mine.metadata.labels = Some([(SEEN.to_string(), "true".to_string())].into());
            mine.data = Some([("seen-by".to_string(), "watch-options".to_string())].into());
            cluster::apply(&mine, false)?;
        }
        Ok(Action::Done)
    }
}

export_controller!(WatchOptions);
