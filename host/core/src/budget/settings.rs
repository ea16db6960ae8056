//! The operator's budgets: defaults for every plugin, and `--plugin-override`s for
//! single plugins.

use std::collections::BTreeMap;

use super::Budget;

/// Why a `--plugin-override` is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--plugin-override {given:?}: {reason}")]
pub struct OverrideError {
    /// The flag's value.
    pub given: String,
    /// What is wrong.
    pub reason: String,
}

/// The defaults and the per-plugin overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetSettings {
    /// What every plugin gets.
    pub defaults: Budget,
    /// Plugin name → its budget, for plugins the operator singled out.
    pub overrides: BTreeMap<String, Budget>,
}

impl BudgetSettings {
    /// The budget of `plugin`.
    pub fn for_plugin(&self, plugin: &str) -> Budget {
        self.overrides
            .get(plugin)
            .cloned()
            .unwrap_or_else(|| self.defaults.clone())
    }

    /// Applies one `NAME:KEY=VALUE[,KEY=VALUE...]` override on top of the defaults
    /// (call after the defaults are final); each key goes to the part of the budget
    /// that declares it ([`Budget::keys`]).
    pub fn add_override(&mut self, given: &str) -> Result<(), OverrideError> {
        let err = |reason: String| OverrideError {
            given: given.to_string(),
            reason,
        };
        let (plugin, settings) = given
            .split_once(':')
            .ok_or_else(|| err("expected NAME:KEY=VALUE[,KEY=VALUE...]".into()))?;
        let mut budget = self.for_plugin(plugin);
        for setting in settings.split(',') {
            let (key, value) = setting
                .split_once('=')
                .ok_or_else(|| err(format!("{setting:?} is not KEY=VALUE")))?;
            budget.set(key.trim(), value.trim()).map_err(err)?;
        }
        self.overrides.insert(plugin.to_string(), budget);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_one_plugin_and_name_the_bad_part() {
        let mut settings = BudgetSettings::default();
        settings
            .add_override("pod-counter:api-qps=200, api-burst=400")
            .expect("valid");
        let pc = settings.for_plugin("pod-counter");
        assert_eq!((pc.api.qps, pc.api.burst), (200.0, 400));
        assert_eq!(settings.for_plugin("other"), Budget::default());
        for (bad, says) in [
            ("pod-counter", "expected NAME:KEY=VALUE"),
            ("p:api-qps", "is not KEY=VALUE"),
            ("p:api-qps=0", "must be a positive number"),
            ("p:api-qps=fast", "api-qps=fast"),
            ("p:speed=1", "unknown key \"speed\""),
            ("p:max-cache-mib=99999999999999999", "too large"),
        ] {
            let err = settings.add_override(bad).expect_err(bad).to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
