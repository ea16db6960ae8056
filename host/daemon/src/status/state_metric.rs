//! `wcm_plugin_state{plugin, state}`, read from the plugin table at each scrape: the
//! table is where a plugin's state is decided (running, degraded, crash-looping,
//! failed, waiting, forbidden), so the metric cannot miss a state, or keep the
//! series of a plugin the table no longer holds.

use std::collections::BTreeSet;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::PluginTable;
use wcm_core::metrics::StateLabels;

/// Encodes one series, value 1, per plugin in the table, naming its state.
#[derive(Debug)]
pub struct PluginStateCollector {
    table: PluginTable,
}

impl PluginStateCollector {
    /// Reports the rows of `table`.
    pub fn new(table: PluginTable) -> PluginStateCollector {
        PluginStateCollector { table }
    }
}

impl Collector for PluginStateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        // A set: a file and a WasmPlugin claiming one identity are two rows (one of
        // them failed), and two rows of one state must still be one series.
        let series: BTreeSet<(String, &'static str)> = (self.table.states().into_iter())
            .map(|(plugin, state)| (plugin, state.name()))
            .collect();
        let family = Family::<StateLabels, Gauge>::default();
        for (plugin, state) in series {
            let labels = StateLabels {
                plugin,
                state: state.to_string(),
            };
            family.get_or_create(&labels).set(1);
        }
        let help = "1 for the state of each plugin file or WasmPlugin: running, degraded, \
                    crash-looping, failed, waiting or forbidden";
        family.encode(encoder.encode_descriptor(
            "plugin_state",
            help,
            None,
            family.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::status::{PluginStatus, State};

    fn scrape(table: &PluginTable) -> String {
        let mut registry = Registry::default();
        registry
            .sub_registry_with_prefix("wcm")
            .register_collector(Box::new(PluginStateCollector::new(table.clone())));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encoded");
        text
    }

    #[test]
    fn every_row_has_its_state_and_a_row_removed_has_none() {
        let table = PluginTable::default();
        table.set(PluginStatus::running("counter.wasm", "counter", "1", "h"));
        table.set(PluginStatus::failed("broken.wasm", "not a component"));
        table.set(PluginStatus::failed(
            "wasmplugin/pulled",
            "manifest unknown",
        ));
        table.set_health("counter.wasm", State::CrashLooping, None);
        let text = scrape(&table);
        for line in [
            r#"wcm_plugin_state{plugin="counter",state="crash-looping"} 1"#,
            r#"wcm_plugin_state{plugin="broken",state="failed"} 1"#,
            r#"wcm_plugin_state{plugin="pulled",state="failed"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(!text.contains(r#"state="running""#), "{text}");
        table.remove("broken.wasm");
        assert!(!scrape(&table).contains(r#"plugin="broken""#));
    }

    #[test]
    fn two_rows_of_one_identity_and_state_are_one_series() {
        let table = PluginTable::default();
        table.set(PluginStatus::failed("twin.wasm", "claimed twice"));
        table.set(PluginStatus::failed("wasmplugin/twin", "claimed twice"));
        let text = scrape(&table);
        assert_eq!(text.matches(r#"plugin="twin""#).count(), 1, "{text}");
    }
}
