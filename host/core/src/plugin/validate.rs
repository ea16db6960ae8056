//! Checks a plugin's registration whole before anything starts: every name, kind,
//! namespace, selector, key and period it declares, so a plugin with a mistake is
//! refused at load with the reason instead of running without ever reconciling.

use std::time::Duration;

use crate::budget::Budget;
use crate::contract::{KeyMapping, Permission, Registration, Watch, parse_predicate, parse_verb};
use crate::keys::from_wit_gvk;
use crate::kube::discovery::display_gvk;
use crate::kube::names::{is_dns_label, validate_kind, validate_namespace};
use crate::kube::{field_selector, selector};
use crate::logs::shorten;

/// A registration that breaks the host's rules, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid registration: {0}")]
pub struct InvalidRegistration(pub String);

/// Shortest resync period: a resync walks every cached object of the plugin's
/// watches, so a shorter one would keep a host thread busy for one plugin.
pub const MIN_RESYNC: Duration = Duration::from_secs(1);
/// Longest resync period (a week); "never" is `none`.
pub const MAX_RESYNC: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest version string.
const VERSION_MAX: usize = 64;
/// Longest fixed key.
const FIXED_KEY_MAX: usize = 253;
/// Longest label selector.
const SELECTOR_MAX: usize = 1024;
/// Most permission entries.
const PERMISSIONS_MAX: usize = 64;
/// Most verbs in one permission entry.
const VERBS_MAX: usize = 16;
/// Most namespaces one watch names (each is an informer, counted against the
/// plugin's watches too).
pub const NAMESPACES_MAX: usize = 64;
/// Most predicates on one watch.
const PREDICATES_MAX: usize = 8;

/// Checks `reg` against the rules and the plugin's `budget`.
pub fn validate(reg: &Registration, budget: &Budget) -> Result<(), InvalidRegistration> {
    let refuse = |reason: String| Err(InvalidRegistration(reason));
    for name in [Some(&reg.name), reg.registered_as.as_ref()]
        .into_iter()
        .flatten()
    {
        if !is_dns_label(name) {
            return refuse(format!(
                "name {:?} must be a DNS-1123 label (lower-case alphanumeric or '-', at most 63)",
                shorten(name)
            ));
        }
    }
    let printable = |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_control() || c == ' ');
    if !printable(&reg.version) || reg.version.len() > VERSION_MAX {
        return refuse(format!(
            "version {:?} must be 1 to {VERSION_MAX} printable characters without spaces",
            shorten(&reg.version)
        ));
    }
    if reg.watches.is_empty() {
        return refuse("no watches: nothing would ever be reconciled".into());
    }
    for (i, watch) in reg.watches.iter().enumerate() {
        check_watch(watch).map_err(|e| InvalidRegistration(format!("watch {i}: {e}")))?;
    }
    let informers: usize = reg.watches.iter().map(|w| w.namespaces.len().max(1)).sum();
    if informers > budget.watches.max_watches {
        return refuse(format!(
            "{informers} watches, more than the {} this plugin may have \
             (--max-watches-per-plugin; each namespace a watch names counts as one)",
            budget.watches.max_watches
        ));
    }
    if reg.permissions.len() > PERMISSIONS_MAX {
        return refuse(format!(
            "{} permission entries, more than {PERMISSIONS_MAX}",
            reg.permissions.len()
        ));
    }
    for p in &reg.permissions {
        let k = &p.kind;
        validate_kind(&k.group, &k.version, &k.kind)
            .map_err(|e| InvalidRegistration(format!("permission: {e}")))?;
        check_verbs(p)?;
    }
    crate::metrics::plugin::check(&reg.metrics).map_err(InvalidRegistration)?;
    check_resync(reg.resync_period_ms)
}

fn check_watch(watch: &Watch) -> Result<(), String> {
    let k = &watch.kind;
    validate_kind(&k.group, &k.version, &k.kind).map_err(|e| e.to_string())?;
    if watch.namespaces.len() > NAMESPACES_MAX {
        return Err(format!(
            "{} namespaces, more than {NAMESPACES_MAX}",
            watch.namespaces.len()
        ));
    }
    for (i, ns) in watch.namespaces.iter().enumerate() {
        validate_namespace(ns).map_err(|e| e.to_string())?;
        if watch.namespaces[..i].contains(ns) {
            return Err(format!("namespace {ns:?} named twice"));
        }
    }
    if let Some(fields) = &watch.field_selector {
        field_selector::parse(fields).map_err(|e| e.to_string())?;
    }
    if watch.predicates.len() > PREDICATES_MAX {
        return Err(format!(
            "{} predicates, more than {PREDICATES_MAX}",
            watch.predicates.len()
        ));
    }
    for predicate in &watch.predicates {
        parse_predicate(predicate).map_err(|e| e.to_string())?;
    }
    if let Some(sel) = &watch.label_selector {
        if sel.len() > SELECTOR_MAX {
            return Err(format!(
                "label selector of {} bytes, more than {SELECTOR_MAX}",
                sel.len()
            ));
        }
        selector::parse(sel).map_err(|e| e.to_string())?;
    }
    match &watch.maps_to {
        KeyMapping::Object => Ok(()),
        KeyMapping::ControllerOwner(owner) => {
            validate_kind(&owner.group, &owner.version, &owner.kind)
                .map_err(|e| format!("owner {e}"))
        }
        KeyMapping::Fixed(key) => {
            let ok =
                !key.is_empty() && key.len() <= FIXED_KEY_MAX && !key.chars().any(char::is_control);
            match ok {
                true => Ok(()),
                false => Err(format!(
                    "fixed key {:?} must be 1 to {FIXED_KEY_MAX} bytes without control characters",
                    shorten(key)
                )),
            }
        }
    }
}

/// Every verb of a permission is one this host knows, and there are not too many.
fn check_verbs(p: &Permission) -> Result<(), InvalidRegistration> {
    let on = || display_gvk(&from_wit_gvk(&p.kind));
    if p.verbs.len() > VERBS_MAX {
        return Err(InvalidRegistration(format!(
            "permission on {}: {} verbs, more than {VERBS_MAX}",
            on(),
            p.verbs.len()
        )));
    }
    for verb in &p.verbs {
        parse_verb(verb)
            .map_err(|e| InvalidRegistration(format!("permission on {}: {e}", on())))?;
    }
    Ok(())
}

fn check_resync(period_ms: Option<u64>) -> Result<(), InvalidRegistration> {
    let Some(ms) = period_ms else {
        return Ok(());
    };
    let period = Duration::from_millis(ms);
    if (MIN_RESYNC..=MAX_RESYNC).contains(&period) {
        return Ok(());
    }
    Err(InvalidRegistration(format!(
        "resync-period-ms {ms} is outside {} to {} (none turns resync off)",
        MIN_RESYNC.as_millis(),
        MAX_RESYNC.as_millis()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Gvk, MetricDeclaration, MetricKind};

    fn pods() -> Gvk {
        Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
        }
    }

    fn registration() -> Registration {
        Registration {
            name: "pod-counter".into(),
            registered_as: None,
            version: "0.1.0".into(),
            watches: vec![Watch {
                kind: pods(),
                namespaces: Vec::new(),
                label_selector: Some("app in (web, api)".into()),
                field_selector: Some("status.phase!=Failed".into()),
                metadata_only: true,
                predicates: vec!["labels-changed".into()],
                maps_to: KeyMapping::Fixed("all-pods".into()),
            }],
            permissions: vec![Permission {
                kind: pods(),
                verbs: vec!["patch".into()],
            }],
            max_concurrent_reconciles: 0,
            resync_period_ms: None,
            metrics: vec![MetricDeclaration {
                name: "widgets".into(),
                help: "Widgets seen".into(),
                kind: MetricKind::Counter,
                labels: vec!["state".into()],
                buckets: Vec::new(),
            }],
        }
    }

    fn refused(change: impl FnOnce(&mut Registration)) -> String {
        let mut reg = registration();
        change(&mut reg);
        match validate(&reg, &Budget::default()) {
            Err(e) => e.to_string(),
            Ok(()) => panic!("accepted: {reg:?}"),
        }
    }

    #[test]
    fn a_sound_registration_passes() {
        assert!(validate(&registration(), &Budget::default()).is_ok());
    }

    #[test]
    fn every_declared_string_and_number_is_checked_with_the_reason() {
        for (reason, change) in [
            (
                "invalid label selector",
                Box::new(|r: &mut Registration| {
                    r.watches[0].label_selector = Some("app in web".into())
                }) as Box<dyn FnOnce(&mut Registration)>,
            ),
            (
                "namespace \"Not-A-Label\"",
                Box::new(|r| r.watches[0].namespaces = vec!["Not-A-Label".into()]),
            ),
            (
                "namespace \"a\" named twice",
                Box::new(|r| r.watches[0].namespaces = vec!["a".into(), "b".into(), "a".into()]),
            ),
            (
                "65 namespaces, more than 64",
                Box::new(|r| r.watches[0].namespaces = (0..65).map(|i| format!("n{i}")).collect()),
            ),
            (
                "17 watches, more than the 16",
                Box::new(|r| {
                    r.watches.push(r.watches[0].clone());
                    r.watches[0].namespaces = (0..16).map(|i| format!("n{i}")).collect();
                }),
            ),
            (
                "watch 0: invalid field selector \"status.phase\": \"status.phase\" has no operator",
                Box::new(|r| r.watches[0].field_selector = Some("status.phase".into())),
            ),
            (
                "watch 0: unknown predicate \"status-changed\"",
                Box::new(|r| r.watches[0].predicates.push("status-changed".into())),
            ),
            (
                "the version must be a DNS label",
                Box::new(|r| r.watches[0].kind.version = "v1/../..".into()),
            ),
            (
                "resync-period-ms 1 is outside 1000 to 604800000",
                Box::new(|r| r.resync_period_ms = Some(1)),
            ),
            (
                &format!("resync-period-ms {} is outside", u64::MAX),
                Box::new(|r| r.resync_period_ms = Some(u64::MAX)),
            ),
            (
                "fixed key \"\"",
                Box::new(|r| r.watches[0].maps_to = KeyMapping::Fixed(String::new())),
            ),
            (
                "17 watches, more than the 16",
                Box::new(|r| r.watches = vec![r.watches[0].clone(); 17]),
            ),
            (
                "version \"0.1\\n2026",
                Box::new(|r| r.version = "0.1\n2026 INFO forged".into()),
            ),
            (
                "name \"Pod_Counter\"",
                Box::new(|r| r.name = "Pod_Counter".into()),
            ),
            (
                "permission on v1/Pod: unknown verb \"frobnicate\"",
                Box::new(|r| r.permissions[0].verbs.push("frobnicate".into())),
            ),
            (
                "metric \"widgets_total\": a counter's name must not end in _total",
                Box::new(|r| r.metrics[0].name = "widgets_total".into()),
            ),
            (
                "metric \"widgets\": label \"plugin\" is the host's",
                Box::new(|r| r.metrics[0].labels.push("plugin".into())),
            ),
            (
                "metric \"widgets\": only a histogram has buckets",
                Box::new(|r| r.metrics[0].buckets.push(1.0)),
            ),
            (
                "metric \"widgets\": buckets must be at most 16 finite, increasing bounds",
                Box::new(|r| {
                    r.metrics[0].kind = MetricKind::Histogram;
                    r.metrics[0].buckets = vec![1.0, 0.5];
                }),
            ),
            (
                "metric \"Bad-Name\": name \"Bad-Name\" must match",
                Box::new(|r| r.metrics[0].name = "Bad-Name".into()),
            ),
            (
                "metric \"widgets\" declared twice",
                Box::new(|r| r.metrics.push(r.metrics[0].clone())),
            ),
            (
                "17 metrics, more than 16",
                Box::new(|r| {
                    r.metrics = (0..17)
                        .map(|i| MetricDeclaration {
                            name: format!("m{i}"),
                            ..r.metrics[0].clone()
                        })
                        .collect()
                }),
            ),
            (
                "permission: kind",
                Box::new(|r| r.permissions[0].kind.kind = "Pods?x=1".into()),
            ),
        ] {
            let err = refused(change);
            assert!(err.contains(reason), "wanted {reason:?} in {err}");
        }
    }
}
