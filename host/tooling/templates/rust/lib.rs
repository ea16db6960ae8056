//! {{name}}: counts the keys of opted-in ConfigMaps into a label.

use k8s_openapi::api::core::v1::ConfigMap;
use wasm_controller_sdk::{
    Action, Failure, Controller, Error, EventType, Registration, Request, Verb, Watch, cluster,
    export_controller, log,
};

/// The label that opts a ConfigMap in.
const ENABLED: &str = "{{name}}.example.com/enabled";
/// The label the number of keys is written to.
const KEYS: &str = "{{name}}.example.com/keys";

/// The label value for a ConfigMap: how many keys its `data` has.
pub fn keys_label(config_map: &ConfigMap) -> String {
    config_map.data.as_ref().map_or(0, |d| d.len()).to_string()
}

/// The controller.
pub struct Plugin;

impl Controller for Plugin {
    fn registration() -> Registration {
        Registration::new("{{name}}", env!("CARGO_PKG_VERSION"))
            .watch(Watch::all::<ConfigMap>().labels(ENABLED))
            .permit::<ConfigMap>(&[Verb::Patch])
    }

    fn reconcile(request: Request) -> Result<Action, Failure> {
        let Some(target) = request.object() else {
            return Ok(Action::Done);
        };
        let config_map: ConfigMap =
            match cluster::get(request.namespace.as_deref(), &request.name) {
                Ok(found) => found,
                Err(e) if e.is_not_found() => return Ok(Action::Done), // deleted meanwhile
                Err(e) => return Err(e.into()),
            };
        let wanted = keys_label(&config_map);
        let labels = config_map.metadata.labels.unwrap_or_default();
        if labels.get(KEYS) != Some(&wanted) {
            // The Event before the label: once the label is right this branch is not
            // taken again, so an Event recorded after it would be lost to a crash in
            // between (`make test` runs `--faults all`, which finds that).
            let note = format!("{wanted} keys");
            cluster::record_event(&target, EventType::Normal, "KeysCounted", &note)?;
            cluster::patch_labels(&target, &[(KEYS, wanted.as_str())], &[])?;
            log::info(&format!("{}: {note}", request.name));
        }
        Ok(Action::Done)
    }
}

export_controller!(Plugin);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_label_is_the_number_of_data_keys() {
        let mut config_map = ConfigMap::default();
        assert_eq!(keys_label(&config_map), "0");
        let data = BTreeMap::from([("a".to_string(), "1".to_string())]);
        config_map.data = Some(data);
        assert_eq!(keys_label(&config_map), "1");
    }
}
