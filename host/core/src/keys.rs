//! Reconcile keys and the mapping from a changed object to the key it wakes up.

use std::fmt;

use kube::core::GroupVersionKind;

use crate::contract::{Gvk, Request};
use crate::kube::cache::{CachedObject, Change};
use crate::kube::discovery::{display_gvk, split_api_version};

/// What the queue holds and `reconcile` receives: the name of something to reconcile,
/// never the object itself (reconciliation is level-based).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReconcileKey {
    /// The kind of the named object; none for a fixed key.
    pub kind: Option<GroupVersionKind>,
    /// Its namespace; none for cluster-scoped objects and fixed keys.
    pub namespace: Option<String>,
    /// The object's name, or the fixed key.
    pub name: String,
}

impl ReconcileKey {
    /// A fixed key, as used for cluster-wide aggregates.
    pub fn fixed(name: &str) -> ReconcileKey {
        ReconcileKey {
            kind: None,
            namespace: None,
            name: name.to_string(),
        }
    }

    /// The contract request for this key.
    pub fn to_request(&self) -> Request {
        Request {
            kind: self.kind.as_ref().map(to_wit_gvk),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl fmt::Display for ReconcileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.namespace) {
            (None, _) => write!(f, "fixed key {:?}", self.name),
            (Some(k), Some(ns)) => write!(f, "{} {ns}/{}", display_gvk(k), self.name),
            (Some(k), None) => write!(f, "{} {}", display_gvk(k), self.name),
        }
    }
}

/// Converts a host kind to the contract's.
pub fn to_wit_gvk(gvk: &GroupVersionKind) -> Gvk {
    Gvk {
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        kind: gvk.kind.clone(),
    }
}

/// Converts a WIT kind to the host's.
pub fn from_wit_gvk(gvk: &Gvk) -> GroupVersionKind {
    GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind)
}

/// How changes to one watch become keys (the WIT `key-mapping`, resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMapping {
    /// The changed object itself, of the watched kind.
    Object(GroupVersionKind),
    /// The changed object's controller owner, if it is of this kind.
    ControllerOwner {
        /// The owner kind to look for.
        owner: GroupVersionKind,
        /// Whether that kind is namespaced (then the owner shares the object's namespace).
        namespaced: bool,
    },
    /// Always this one key.
    Fixed(String),
}

impl KeyMapping {
    /// The keys a change wakes: the object's key (or its owner's, or the fixed key)
    /// and, when an update moved or removed the object's controller owner, the
    /// former owner's too, as controller-runtime's `EnqueueRequestForOwner` does.
    pub fn keys_for(&self, change: &Change) -> impl Iterator<Item = ReconcileKey> {
        let (now, before) = match change {
            Change::Applied { new, old } => (self.key_for(new), old.as_deref()),
            Change::Deleted(obj) => (self.key_for(obj), None),
        };
        let former = match self {
            KeyMapping::ControllerOwner { .. } => before
                .and_then(|old| self.key_for(old))
                .filter(|k| Some(k) != now.as_ref()),
            _ => None,
        };
        now.into_iter().chain(former)
    }

    /// The key a change of `obj` wakes, if any.
    pub fn key_for(&self, obj: &CachedObject) -> Option<ReconcileKey> {
        match self {
            KeyMapping::Object(kind) => Some(ReconcileKey {
                kind: Some(kind.clone()),
                namespace: obj.namespace.clone(),
                name: obj.name.clone(),
            }),
            KeyMapping::ControllerOwner { owner, namespaced } => {
                // Group and kind, not the version: an owner stored as apps/v1 may be
                // referenced as apps/v1beta2 (controller-runtime compares the same).
                let reference = obj.owners.iter().find(|r| {
                    let (group, _) = split_api_version(&r.api_version);
                    r.controller == Some(true) && r.kind == owner.kind && group == owner.group
                })?;
                Some(ReconcileKey {
                    kind: Some(owner.clone()),
                    namespace: if *namespaced {
                        obj.namespace.clone()
                    } else {
                        None
                    },
                    name: reference.name.clone(),
                })
            }
            KeyMapping::Fixed(key) => Some(ReconcileKey::fixed(key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::DynamicObject;
    use serde_json::json;

    use super::*;

    fn replica_set(owner_kind: &str, controller: bool) -> CachedObject {
        owned_by("apps/v1", owner_kind, "web", controller)
    }

    fn owned_by(api_version: &str, kind: &str, owner: &str, controller: bool) -> CachedObject {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d4", "namespace": "shop", "ownerReferences": [{
                "apiVersion": api_version, "kind": kind, "name": owner,
                "uid": "u1", "controller": controller}]},
        }))
        .expect("json");
        CachedObject::from_dynamic(obj).expect("serialise")
    }

    fn deployment_owner() -> KeyMapping {
        KeyMapping::ControllerOwner {
            owner: GroupVersionKind::gvk("apps", "v1", "Deployment"),
            namespaced: true,
        }
    }

    #[test]
    fn an_owner_referenced_with_another_version_of_its_group_is_found() {
        let rs = owned_by("apps/v1beta2", "Deployment", "web", true);
        let key = deployment_owner()
            .key_for(&rs)
            .expect("same group and kind");
        assert_eq!(key.to_string(), "apps/v1/Deployment shop/web");
        let other_group = owned_by("extensions.example.com/v1", "Deployment", "web", true);
        assert_eq!(deployment_owner().key_for(&other_group), None);
    }

    #[test]
    fn a_moved_or_removed_owner_reference_wakes_the_former_owner_too() {
        let mapping = deployment_owner();
        let keys = |change: Change| -> Vec<String> {
            mapping.keys_for(&change).map(|k| k.to_string()).collect()
        };
        let was = Arc::new(owned_by("apps/v1", "Deployment", "old", true));
        let moved = Arc::new(owned_by("apps/v1", "Deployment", "new", true));
        let orphan = Arc::new(owned_by("apps/v1", "Deployment", "new", false));
        assert_eq!(
            keys(Change::Applied {
                new: moved.clone(),
                old: Some(was.clone())
            }),
            ["apps/v1/Deployment shop/new", "apps/v1/Deployment shop/old"]
        );
        assert_eq!(
            keys(Change::Applied {
                new: orphan,
                old: Some(was.clone())
            }),
            ["apps/v1/Deployment shop/old"]
        );
        assert_eq!(
            keys(Change::Applied {
                new: moved.clone(),
                old: Some(moved)
            }),
            ["apps/v1/Deployment shop/new"],
            "an unchanged owner is woken once"
        );
        assert_eq!(keys(Change::Deleted(was)), ["apps/v1/Deployment shop/old"]);
    }

    #[test]
    fn object_mapping_names_the_object() {
        let rs = GroupVersionKind::gvk("apps", "v1", "ReplicaSet");
        let key = KeyMapping::Object(rs).key_for(&replica_set("Deployment", true));
        let key = key.expect("key");
        assert_eq!(key.to_string(), "apps/v1/ReplicaSet shop/web-5d4");
    }

    #[test]
    fn owner_mapping_follows_only_the_controller_owner_of_the_declared_kind() {
        let mapping = KeyMapping::ControllerOwner {
            owner: GroupVersionKind::gvk("apps", "v1", "Deployment"),
            namespaced: true,
        };
        let key = mapping
            .key_for(&replica_set("Deployment", true))
            .expect("owner key");
        assert_eq!(key.to_string(), "apps/v1/Deployment shop/web");
        assert_eq!(mapping.key_for(&replica_set("Deployment", false)), None);
        assert_eq!(mapping.key_for(&replica_set("StatefulSet", true)), None);
    }

    #[test]
    fn fixed_mapping_collapses_everything_into_one_key() {
        let key = KeyMapping::Fixed("count".into()).key_for(&replica_set("X", false));
        assert_eq!(key, Some(ReconcileKey::fixed("count")));
        assert!(ReconcileKey::fixed("count").to_request().kind.is_none());
    }
}
