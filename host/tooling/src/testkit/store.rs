//! The test kit's objects: the fixtures, changed by the plugin's writes with the API
//! server's bookkeeping (uid, resourceVersion, generation, field managers, owners'
//! dependents). The clock does not move: every timestamp it sets is [`CLOCK`].

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::fields::{self, FieldPath, Ownership};

mod object_writes;
mod ownership;

pub use object_writes::apply_patch;
use ownership::{label_path, leaf_paths, merge_applied, owned_part, spec_part};
use wcm_core::contract::{Cause, DeleteOptions, Propagation};

/// The field manager of everything the fixtures set.
pub const FIXTURE_MANAGER: &str = "fixtures";
/// The time of every timestamp the test kit sets, and of the plugin's wall clock.
pub const CLOCK: &str = "2026-01-01T00:00:00Z";
/// [`CLOCK`] since the Unix epoch.
pub const CLOCK_SINCE_EPOCH: std::time::Duration = std::time::Duration::from_secs(1_767_225_600);

/// One object's address: API group, kind, namespace (none if cluster-scoped), name.
/// The version is not part of it, as in the API server (one object, many versions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, if the kind is namespaced.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectId {
    /// The same address with another name.
    pub fn with_name(&self, name: String) -> ObjectId {
        ObjectId {
            name,
            ..self.clone()
        }
    }
}

/// An object at `id` as the report names it: `apps/v1/Deployment demo/shop`.
pub fn describe(object: &Value, id: &ObjectId) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    match &id.namespace {
        Some(ns) => format!("{api_version}/{} {ns}/{}", id.kind, id.name),
        None => format!("{api_version}/{} {}", id.kind, id.name),
    }
}

/// Why a write was refused, as the API server would refuse it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist.
    #[error("not found")]
    NotFound,
    /// A precondition failed.
    #[error("{0}")]
    Conflict(String),
    /// An apply would change fields other managers own: the message, and the field
    /// and manager of each conflict (the Status causes the API server gives).
    #[error("{0}")]
    ApplyConflict(String, Vec<Cause>),
    /// An object of that name exists.
    #[error("already exists")]
    AlreadyExists,
    /// The write is not one the API server would accept (a failed JSON patch `test`).
    #[error("{0}")]
    Invalid(String),
}

/// What one write did to one object, for the watches.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The object before; none if it was created.
    pub before: Option<Value>,
    /// The object after; none if it was deleted.
    pub after: Option<Value>,
}

#[derive(Debug)]
struct Stored {
    object: Value,
    owners: Ownership,
}

/// Every object of the in-memory cluster.
#[derive(Debug, Default)]
pub struct Store {
    objects: BTreeMap<ObjectId, Stored>,
    /// Each object's last resourceVersion, kept after it is deleted so a name made
    /// again goes on counting. Per object, not one counter for the cluster as the
    /// API server's: a version says only that its object changed, and a fault
    /// exploration compares runs that made different writes elsewhere (a plugin that
    /// writes a Secret's version into a Pod template must write the same in both).
    versions: BTreeMap<ObjectId, u64>,
    last_uid: u64,
}

impl Store {
    /// Adds a fixture (all its fields owned by [`FIXTURE_MANAGER`]); refuses a second
    /// object with the same address.
    pub fn insert(&mut self, id: ObjectId, mut object: Value) -> Result<(), String> {
        if self.objects.contains_key(&id) {
            return Err("an object with this kind, namespace and name is given twice".into());
        }
        let mut owners = Ownership::default();
        owners.share(FIXTURE_MANAGER, leaf_paths(&owned_part(&object)));
        self.stamp_new(&id, &mut object);
        self.objects.insert(id, Stored { object, owners });
        Ok(())
    }

    /// The object at `id`.
    pub fn get(&self, id: &ObjectId) -> Option<&Value> {
        self.objects.get(id).map(|s| &s.object)
    }

    /// Every object, ordered by group, kind, namespace and name.
    pub fn objects(&self) -> impl Iterator<Item = (&ObjectId, &Value)> {
        self.objects.iter().map(|(id, s)| (id, &s.object))
    }

    /// Sets and removes labels as `manager` (a merge patch).
    pub fn patch_labels(
        &mut self,
        id: &ObjectId,
        set: &[(String, String)],
        remove: &[String],
        manager: &str,
    ) -> Result<Option<Changed>, StoreError> {
        self.update(id, |stored| {
            for key in remove {
                let path = label_path(key);
                fields::remove_at(&mut stored.object, &path);
                stored.owners.release(&path);
            }
            for (key, value) in set {
                let path = label_path(key);
                fields::set_at(&mut stored.object, &path, json!(value));
                stored.owners.take(manager, path);
            }
            Ok(())
        })
    }

    /// Replaces the finalizers, if the object is still at `resource_version`; an
    /// object being deleted goes, with its dependents, once its last finalizer is
    /// removed. Returns the object as the write left it, and what changed.
    pub fn set_finalizers(
        &mut self,
        id: &ObjectId,
        resource_version: &str,
        finalizers: &[String],
    ) -> Result<(Value, Vec<Changed>), StoreError> {
        let expected = json!({"metadata": {"resourceVersion": resource_version}});
        let changed = self.update(id, |stored| {
            object_writes::check_version(&stored.object, &expected)?;
            let meta = &mut stored.object["metadata"];
            match finalizers.is_empty() {
                true => _ = meta.as_object_mut().map(|m| m.remove("finalizers")),
                false => meta["finalizers"] = json!(finalizers),
            }
            Ok(())
        })?;
        let stored = self
            .objects
            .get(id)
            .ok_or(StoreError::NotFound)?
            .object
            .clone();
        let meta = &stored["metadata"];
        let released = meta.get("deletionTimestamp").is_some() && meta.get("finalizers").is_none();
        let changes = match released {
            true => self.delete(id, &DeleteOptions::unconditional(Propagation::Background))?,
            false => changed.into_iter().collect(),
        };
        Ok((stored, changes))
    }

    /// Merges `status` into the object's status as `manager` (a JSON merge patch).
    pub fn patch_status(
        &mut self,
        id: &ObjectId,
        status: &Value,
        manager: &str,
    ) -> Result<Option<Changed>, StoreError> {
        self.update(id, |stored| {
            let mut current = stored.object.get("status").cloned().unwrap_or(json!({}));
            json_patch::merge(&mut current, status);
            fields::set_at(&mut stored.object, &vec!["status".into()], current);
            for (path, value) in fields::leaves(status) {
                let path = [vec!["status".to_string()], path].concat();
                match value {
                    Value::Null => stored.owners.release(&path),
                    _ => stored.owners.take(manager, path),
                }
            }
            Ok(())
        })
    }

    /// Server-side applies `config` as `manager`; returns the object as stored.
    pub fn apply(
        &mut self,
        id: &ObjectId,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<(Value, Option<Changed>), StoreError> {
        let applied: Vec<(FieldPath, Value)> = fields::leaves(&owned_part(config));
        if !self.objects.contains_key(id) {
            let mut object = json!({"metadata": {"name": id.name}});
            if let Some(ns) = &id.namespace {
                object["metadata"]["namespace"] = json!(ns);
            }
            for (path, value) in &applied {
                fields::set_at(&mut object, path, value.clone());
            }
            object["apiVersion"] = config["apiVersion"].clone();
            object["kind"] = config["kind"].clone();
            let paths = applied.into_iter().map(|(p, _)| p);
            let (after, changed) = self.insert_new(id, object, manager, paths);
            return Ok((after, Some(changed)));
        }
        let changed = self.update(id, |stored| {
            merge_applied(stored, config, &applied, manager, force)
        })?;
        Ok((self.objects[id].object.clone(), changed))
    }

    /// Deletes the object: marked for deletion while it has finalizers, else removed
    /// with its dependents handled as the garbage collector would.
    pub fn delete(
        &mut self,
        id: &ObjectId,
        options: &DeleteOptions,
    ) -> Result<Vec<Changed>, StoreError> {
        let stored = self.objects.get(id).ok_or(StoreError::NotFound)?;
        check_preconditions(&stored.object, options)?;
        let propagation = options.propagation;
        let finalizers = (stored.object.pointer("/metadata/finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if finalizers {
            let marked = self.update(id, |stored| {
                let meta = &mut stored.object["metadata"];
                if meta.get("deletionTimestamp").is_none() {
                    meta["deletionTimestamp"] = json!(CLOCK);
                }
                Ok(())
            })?;
            return Ok(marked.into_iter().collect());
        }
        let removed = self.objects.remove(id).expect("looked up above");
        let uid = removed.object.pointer("/metadata/uid").cloned();
        let mut changes = vec![Changed {
            before: Some(removed.object),
            after: None,
        }];
        if let Some(uid) = uid {
            changes.extend(self.collect_dependents(&uid, propagation));
        }
        Ok(changes)
    }

    /// Deletes (or, for `orphan`, unlinks) the objects owned by `uid`.
    fn collect_dependents(&mut self, uid: &Value, propagation: Propagation) -> Vec<Changed> {
        let dependents: Vec<ObjectId> = (self.objects.iter())
            .filter(|(_, s)| owner_uids(&s.object).any(|u| u == uid))
            .map(|(id, _)| id.clone())
            .collect();
        let mut changes = Vec::new();
        for id in dependents {
            let done = match propagation {
                Propagation::Orphan => self
                    .update(&id, |s| {
                        drop_owner(&mut s.object, uid);
                        Ok(())
                    })
                    .map(|c| c.into_iter().collect()),
                _ => self.delete(&id, &DeleteOptions::unconditional(Propagation::Background)),
            };
            changes.extend(done.unwrap_or_default());
        }
        changes
    }

    /// Changes the object at `id` with `change`; a change that leaves the object as it
    /// was is no change (no new resourceVersion, no watch event), as in the API server.
    fn update(
        &mut self,
        id: &ObjectId,
        change: impl FnOnce(&mut Stored) -> Result<(), StoreError>,
    ) -> Result<Option<Changed>, StoreError> {
        let stored = self.objects.get_mut(id).ok_or(StoreError::NotFound)?;
        let before = stored.object.clone();
        change(stored)?;
        if stored.object == before {
            return Ok(None);
        }
        let version = self.next_version(id);
        let stored = self.objects.get_mut(id).expect("present above");
        let spec_changed = spec_part(&before) != spec_part(&stored.object);
        let meta = &mut stored.object["metadata"];
        meta["resourceVersion"] = json!(version.to_string());
        if spec_changed {
            let generation = meta["generation"].as_i64().unwrap_or(1);
            meta["generation"] = json!(generation + 1);
        }
        Ok(Some(Changed {
            before: Some(before),
            after: Some(stored.object.clone()),
        }))
    }

    /// Stores a new object whose fields at `paths` `manager` owns; returns it as
    /// stored and the change.
    fn insert_new(
        &mut self,
        id: &ObjectId,
        mut object: Value,
        manager: &str,
        paths: impl IntoIterator<Item = FieldPath>,
    ) -> (Value, Changed) {
        let mut owners = Ownership::default();
        owners.share(manager, paths);
        self.stamp_new(id, &mut object);
        let after = object.clone();
        self.objects.insert(id.clone(), Stored { object, owners });
        let changed = Changed {
            before: None,
            after: Some(after.clone()),
        };
        (after, changed)
    }

    /// The next resourceVersion of the object at `id`.
    fn next_version(&mut self, id: &ObjectId) -> u64 {
        let version = self.versions.entry(id.clone()).or_default();
        *version += 1;
        *version
    }

    /// Sets what the API server sets on a new object (a fixture keeps its own uid,
    /// generation and creation time).
    fn stamp_new(&mut self, id: &ObjectId, object: &mut Value) {
        let version = self.next_version(id);
        self.last_uid += 1;
        let meta = &mut object["metadata"];
        meta["name"] = json!(id.name);
        if let Some(ns) = &id.namespace {
            meta["namespace"] = json!(ns);
        }
        if meta.get("uid").is_none() {
            meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012}", self.last_uid));
        }
        meta["resourceVersion"] = json!(version.to_string());
        if meta.get("generation").is_none() {
            meta["generation"] = json!(1);
        }
        if meta.get("creationTimestamp").is_none() {
            meta["creationTimestamp"] = json!(CLOCK);
        }
    }
}

/// A delete's uid and resourceVersion preconditions, refused as the API server
/// words it.
fn check_preconditions(object: &Value, options: &DeleteOptions) -> Result<(), StoreError> {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let checks = [
        (
            "UID",
            "/metadata/uid",
            &options.uid,
            "deleted and then recreated",
        ),
        (
            "ResourceVersion",
            "/metadata/resourceVersion",
            &options.resource_version,
            "modified",
        ),
    ];
    for (name, pointer, wanted, why) in checks {
        if let Some(wanted) = wanted.as_deref().filter(|w| *w != field(pointer)) {
            return Err(StoreError::Conflict(format!(
                "the {name} in the precondition ({wanted}) does not match the {name} in \
                 record ({}). The object might have been {why}",
                field(pointer)
            )));
        }
    }
    Ok(())
}

fn owner_uids(object: &Value) -> impl Iterator<Item = &Value> {
    (object.pointer("/metadata/ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid"))
}

fn drop_owner(object: &mut Value, uid: &Value) {
    if let Some(refs) = object
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    {
        refs.retain(|r| r.get("uid") != Some(uid));
    }
}

#[cfg(test)]
mod tests;
