//! What a plugin declared it may do, and the checks made from it before any call:
//! shared by the live cluster and the test kit's in-memory one, so a plugin meets the
//! same refusals, worded the same, in both.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::core::{GroupVersionKind, Selector};

use super::{CapabilityError, Target};
use crate::budget::PluginBudget;
use crate::contract::Capability;
use crate::contract::{EventRecord, Registration, Verb};
use crate::keys::from_wit_gvk;
use crate::kube::discovery::display_gvk;
use crate::kube::events::PluginRecorder;
use crate::kube::selector;
use crate::limits::Limit;
use crate::metrics::plugin::PluginMetrics;

/// A plugin's declared verbs per kind and its budgets.
#[derive(Debug)]
pub struct Declared {
    /// Plugin name: field manager and Event reporting controller.
    pub plugin: String,
    /// Verbs the plugin declared per kind; watched kinds are always readable.
    grants: HashMap<GroupVersionKind, HashSet<Verb>>,
    /// The plugin's API rate, result size, Event and log budgets.
    pub budget: Arc<PluginBudget>,
    /// The metrics it declared.
    pub metrics: Arc<PluginMetrics>,
}

impl Declared {
    /// The declarations of the plugin of `budget`.
    pub fn new(
        budget: Arc<PluginBudget>,
        grants: HashMap<GroupVersionKind, HashSet<Verb>>,
    ) -> Declared {
        Declared {
            plugin: budget.plugin.clone(),
            metrics: Arc::new(PluginMetrics::none(&budget.plugin)),
            grants,
            budget,
        }
    }

    /// These declarations with the plugin's metrics.
    pub fn with_metrics(mut self, metrics: Arc<PluginMetrics>) -> Declared {
        self.metrics = metrics;
        self
    }

    /// Whether the plugin declared `verb` on `gvk` (watched kinds: `get` and `list`).
    pub fn allows(&self, verb: Verb, gvk: &GroupVersionKind) -> bool {
        self.grants
            .get(gvk)
            .is_some_and(|verbs| verbs.contains(&verb))
    }

    /// Refuses `op` on `target` unless the plugin declared `verb` on its kind.
    pub fn require(&self, verb: Verb, op: &str, target: &Target) -> Result<(), CapabilityError> {
        if self.allows(verb, &target.gvk) {
            return Ok(());
        }
        Err(CapabilityError::Forbidden(format!(
            "{op} {target}: plugin {} did not declare the {} permission on {}",
            self.plugin,
            verb,
            display_gvk(&target.gvk)
        )))
    }

    /// Events are allowed about the plugin's own kinds: those it watches or declared
    /// a permission on.
    pub fn require_event_permission(
        &self,
        op: &str,
        regarding: &Target,
    ) -> Result<(), CapabilityError> {
        if self.grants.contains_key(&regarding.gvk) {
            return Ok(());
        }
        Err(CapabilityError::Forbidden(format!(
            "{op}: plugin {} may record Events only about kinds it watches or declared a \
             permission on, and {} is neither",
            self.plugin,
            display_gvk(&regarding.gvk)
        )))
    }

    /// Checks an Event before anything is recorded: the plugin may record Events about
    /// `regarding` and name `related`, and the reason, action and note are within
    /// Kubernetes' bounds. Returns the
    /// call's name for later errors.
    pub fn check_event(
        &self,
        regarding: &Target,
        related: Option<&Target>,
        event: &EventRecord,
    ) -> Result<String, CapabilityError> {
        let op = format!(
            "record-event {} on {regarding}",
            crate::logs::shorten(&event.reason)
        );
        self.require_event_permission(&op, regarding)?;
        if let Some(related) = related {
            self.require_event_permission(&format!("{op} (related {related})"), related)?;
        }
        PluginRecorder::check(&event.reason, &event.action, &event.note)
            .map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))?;
        Ok(op)
    }

    /// Refuses an answer of `bytes` over the plugin's result budget, before anything
    /// is copied for the guest.
    pub fn check_result_size(&self, op: &str, bytes: usize) -> Result<(), CapabilityError> {
        let max = self.budget.budget.api.max_result_bytes;
        if bytes <= max {
            return Ok(());
        }
        self.budget.hit(Limit::result_size);
        Err(CapabilityError::Invalid(format!(
            "{op}: the answer would be {bytes} bytes, more than plugin {}'s limit of {max} \
             (--max-result-mib); narrow it with a namespace or label selector",
            self.plugin
        )))
    }

    /// The refusal of a read of a kind the plugin does not watch.
    pub fn not_watched(&self, op: &str, what: &str, gvk: &GroupVersionKind) -> CapabilityError {
        CapabilityError::Invalid(format!(
            "{op} {what}: plugin {} does not watch {} (only watched kinds are cached; \
             declare `get` on it to read single objects from the API server)",
            self.plugin,
            display_gvk(gvk)
        ))
    }
}

/// The contract call a listing is: `list-first` with a limit, `list` without.
pub fn list_call(limit: Option<usize>) -> Capability {
    if limit.is_some() {
        Capability::ListFirst
    } else {
        Capability::List
    }
}

/// What a `list`, `list-first` or `count` names in its errors (`v1/Pod in shop`).
pub fn list_what(gvk: &GroupVersionKind, namespace: Option<&str>) -> String {
    format!(
        "{} in {}",
        display_gvk(gvk),
        namespace.unwrap_or("all namespaces")
    )
}

/// The parsed label selector of a `list`, `list-first` or `count` (`op`) of `what`,
/// or `invalid` if it does not parse. Parsed after the checks that need no parsing
/// (the kind is watched, its reading granted).
pub fn list_selector(
    op: &str,
    what: &str,
    label_selector: Option<&str>,
) -> Result<Selector, CapabilityError> {
    selector::parse(label_selector.unwrap_or(""))
        .map_err(|e| CapabilityError::Invalid(format!("{op} {what}: {e}")))
}

/// Declared verbs per kind; watched kinds are always readable.
pub fn grants(registration: &Registration) -> HashMap<GroupVersionKind, HashSet<Verb>> {
    let mut grants: HashMap<GroupVersionKind, HashSet<Verb>> = HashMap::new();
    for watch in &registration.watches {
        let verbs = grants.entry(from_wit_gvk(&watch.kind)).or_default();
        verbs.extend([Verb::Get, Verb::List]);
    }
    for p in &registration.permissions {
        let verbs = grants.entry(from_wit_gvk(&p.kind)).or_default();
        verbs.extend(p.known_verbs());
    }
    grants
}
