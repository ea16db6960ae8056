//! Changes of RBAC that may change what plugins' ServiceAccounts are granted, seen as
//! they happen, so a plugin's rights are reviewed at once rather than at the next
//! periodic review: a RoleBinding or ClusterRoleBinding naming a plugin's account
//! (or a group every ServiceAccount is in) concerns that plugin (or every plugin); a
//! Role or ClusterRole whose rules change concerns every plugin, since any of them
//! may be bound to it; a binding labelled as one plugin's RBAC (the host's rights for
//! it, bound to the host) concerns that plugin.
//!
//! The bindings are watched whole (their subjects are what matters), the roles by
//! their metadata alone. The host needs `list` and `watch` on the four kinds
//! (`wasm-controller-manager rbac` grants them); without them these informers fail,
//! the host says so, and rights are still reviewed every review interval.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::core::GroupVersionKind;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::identity::{PLUGIN_LABEL, ServiceAccounts};
use crate::kube::cache::{CachedObject, Change};
use crate::kube::discovery::DiscoveryError;
use crate::kube::informer::{Informer, InformerHold, InformerRegistry, WatchScope};

/// Whose rights a change of RBAC may have changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concerned {
    /// These ServiceAccounts (names in the plugins' namespace).
    Accounts(Vec<String>),
    /// Every plugin's.
    Everyone,
}

/// The RBAC informers and what their changes concern.
pub struct RbacChanges {
    changes: mpsc::UnboundedReceiver<Concerned>,
    /// Each informer with its subscription.
    informers: Vec<(Arc<Informer>, u64)>,
    /// Keeps the watches running for as long as the host runs.
    _holds: Vec<InformerHold>,
}

impl Drop for RbacChanges {
    fn drop(&mut self) {
        for (informer, id) in &self.informers {
            informer.unsubscribe(*id);
        }
    }
}

/// A binding's subjects; the rest of it does not matter here.
#[derive(Debug, Deserialize)]
struct Binding {
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Debug, Deserialize)]
struct Subject {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

impl RbacChanges {
    /// Watches the four RBAC kinds through `registry`'s informers.
    pub async fn start(
        registry: &InformerRegistry,
        accounts: &ServiceAccounts,
    ) -> Result<RbacChanges, DiscoveryError> {
        let (tx, changes) = mpsc::unbounded_channel();
        let (mut informers, mut holds) = (Vec::new(), Vec::new());
        for (kind, metadata_only) in [
            ("RoleBinding", false),
            ("ClusterRoleBinding", false),
            ("Role", true),
            ("ClusterRole", true),
        ] {
            let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind);
            let scope = WatchScope {
                gvk,
                namespace: None,
                label_selector: None,
                field_selector: None,
                metadata_only,
            };
            let informer = registry.acquire(scope).await?;
            holds.push(informer.hold());
            let live = Arc::new(AtomicBool::new(false));
            let id = subscribe(
                &informer,
                &live,
                accounts.clone(),
                tx.clone(),
                !metadata_only,
            );
            // What the first list brings is how RBAC was, not a change of it.
            let synced = Arc::downgrade(&informer);
            tokio::spawn(async move {
                let Some(informer) = synced.upgrade() else {
                    return;
                };
                informer.wait_synced().await;
                live.store(true, Ordering::Relaxed);
            });
            informers.push((informer, id));
        }
        Ok(RbacChanges {
            changes,
            informers,
            _holds: holds,
        })
    }

    /// The next change's concern; `None` never comes while the host runs.
    pub async fn next(&mut self) -> Option<Concerned> {
        self.changes.recv().await
    }
}

/// Subscribes to `informer`: each real change once `live` (not the first list, not a
/// relist's unchanged object) is sent as what it concerns.
fn subscribe(
    informer: &Informer,
    live: &Arc<AtomicBool>,
    accounts: ServiceAccounts,
    tx: mpsc::UnboundedSender<Concerned>,
    bindings: bool,
) -> u64 {
    let live = live.clone();
    informer.subscribe(Arc::new(move |change: &Change| {
        if !live.load(Ordering::Relaxed) {
            return;
        }
        let concerned = match change {
            Change::Applied {
                new,
                old: Some(old),
            } if new.resource_version == old.resource_version => {
                return;
            }
            Change::Applied { new, old } if bindings => {
                concerning(&accounts, [Some(new), old.as_ref()].into_iter().flatten())
            }
            Change::Deleted(gone) if bindings => concerning(&accounts, [gone].into_iter()),
            _ => Some(Concerned::Everyone),
        };
        if let Some(concerned) = concerned {
            let _ = tx.send(concerned);
        }
    }))
}

/// What the bindings `objects` (before and after a change) concern: the plugins'
/// accounts they name, every plugin if they name a group all ServiceAccounts are in,
/// nothing otherwise.
fn concerning<'a>(
    accounts: &ServiceAccounts,
    objects: impl Iterator<Item = &'a Arc<CachedObject>>,
) -> Option<Concerned> {
    let everyone = [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{}", accounts.namespace),
        "system:authenticated".to_string(),
    ];
    let mut named = Vec::new();
    for object in objects {
        // One plugin's RBAC (the host's rights for it included) is labelled with it.
        named.extend(object.labels.get(PLUGIN_LABEL).map(|p| accounts.name(p)));
        let binding: Binding = serde_json::from_str(&object.json).ok()?;
        for subject in binding.subjects.unwrap_or_default() {
            match subject.kind.as_str() {
                "Group" if everyone.contains(&subject.name) => return Some(Concerned::Everyone),
                "ServiceAccount"
                    if subject.namespace.as_deref() == Some(accounts.namespace.as_str())
                        && subject.name.starts_with(&accounts.prefix) =>
                {
                    named.push(subject.name)
                }
                "User" => {
                    let user = subject.name.strip_prefix("system:serviceaccount:");
                    let account = user.and_then(|u| u.strip_prefix(&accounts.namespace));
                    let name = account.and_then(|a| a.strip_prefix(':'));
                    named.extend(
                        name.filter(|n| n.starts_with(&accounts.prefix))
                            .map(String::from),
                    );
                }
                _ => {}
            }
        }
    }
    named.sort();
    named.dedup();
    (!named.is_empty()).then_some(Concerned::Accounts(named))
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};

    use super::*;

    fn binding(subjects: serde_json::Value) -> Arc<CachedObject> {
        let resource = ApiResource::erase::<k8s_openapi::api::rbac::v1::RoleBinding>(&());
        let mut obj = DynamicObject::new("b", &resource).within("x");
        obj.data = serde_json::json!({ "subjects": subjects });
        Arc::new(CachedObject::from_dynamic(obj).expect("serialisable"))
    }

    #[test]
    fn a_binding_concerns_the_plugins_it_names_or_all_through_their_groups() {
        let accounts = ServiceAccounts::new("wcm-system", "wcm-plugin-").expect("valid");
        let named = binding(serde_json::json!([
            {"kind": "ServiceAccount", "name": "wcm-plugin-pod-counter", "namespace": "wcm-system"},
            {"kind": "ServiceAccount", "name": "wcm-plugin-other", "namespace": "elsewhere"},
            {"kind": "User", "name": "system:serviceaccount:wcm-system:wcm-plugin-b"},
            {"kind": "ServiceAccount", "name": "default", "namespace": "wcm-system"},
        ]));
        assert_eq!(
            concerning(&accounts, [&named].into_iter()),
            Some(Concerned::Accounts(vec![
                "wcm-plugin-b".into(),
                "wcm-plugin-pod-counter".into()
            ]))
        );
        let group = binding(serde_json::json!([
            {"kind": "Group", "name": "system:serviceaccounts:wcm-system"},
        ]));
        assert_eq!(
            concerning(&accounts, [&group].into_iter()),
            Some(Concerned::Everyone)
        );
        let unrelated = binding(serde_json::json!([{"kind": "User", "name": "alice"}]));
        assert_eq!(concerning(&accounts, [&unrelated].into_iter()), None);
        assert_eq!(
            concerning(&accounts, [&binding(serde_json::json!(null))].into_iter()),
            None
        );
    }

    #[test]
    fn a_binding_labelled_as_a_plugins_rbac_concerns_that_plugin_whoever_it_binds() {
        let accounts = ServiceAccounts::new("wcm-system", "wcm-plugin-").expect("valid");
        let resource = ApiResource::erase::<k8s_openapi::api::rbac::v1::RoleBinding>(&());
        let mut obj = DynamicObject::new("wasm-controller-manager:wcm-plugin-a", &resource)
            .within("wcm-system");
        obj.metadata.labels = Some([(PLUGIN_LABEL.to_string(), "a".to_string())].into());
        obj.data = serde_json::json!({"subjects": [
            {"kind": "ServiceAccount", "name": "wasm-controller-manager", "namespace": "wcm-system"},
        ]});
        let host_for_a = Arc::new(CachedObject::from_dynamic(obj).expect("serialisable"));
        assert_eq!(
            concerning(&accounts, [&host_for_a].into_iter()),
            Some(Concerned::Accounts(vec!["wcm-plugin-a".into()]))
        );
    }
}
