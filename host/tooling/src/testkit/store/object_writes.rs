//! The in-memory store's creates, patches and updates, with the API server's
//! bookkeeping: generated names, the resourceVersion checked for an update (and a
//! merge patch that names one), the status kept out of a write to the object and the
//! object out of a write to its status, and the changed fields owned by the writer.

use serde_json::Value;

use super::{Changed, ObjectId, Store, StoreError, Stored, fields};
use wcm_core::kube::object_writes::PatchBody;

/// The characters of a generated name's suffix (the API server's alphabet).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Store {
    /// Creates `object` at `id` (its name generated from `generate_name` when `id`'s
    /// name is empty) as `manager`; returns it as stored.
    pub fn create(
        &mut self,
        mut id: ObjectId,
        object: &Value,
        manager: &str,
    ) -> Result<(ObjectId, Value, Changed), StoreError> {
        if id.name.is_empty() {
            let prefix = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str);
            id.name = format!("{}{}", prefix.unwrap_or_default(), self.suffix());
        }
        if self.objects.contains_key(&id) {
            return Err(StoreError::AlreadyExists);
        }
        let paths = fields::leaves(object).into_iter().map(|(p, _)| p);
        let (after, changed) = self.insert_new(&id, object.clone(), manager, paths);
        Ok((id, after, changed))
    }

    /// A deterministic five-character suffix, so reports do not change between runs.
    fn suffix(&mut self) -> String {
        self.last_uid += 1;
        let mut n = self.last_uid as usize;
        (0..5)
            .map(|_| {
                let c = SUFFIX_ALPHABET[n % SUFFIX_ALPHABET.len()] as char;
                n /= SUFFIX_ALPHABET.len();
                c
            })
            .collect()
    }

    /// Patches the object at `id`, or its `status` (`subresource`); returns the object.
    pub fn patch(
        &mut self,
        id: &ObjectId,
        body: &PatchBody,
        subresource: Option<&str>,
        manager: &str,
    ) -> Result<(Value, Option<Changed>), StoreError> {
        let changed = self.update(id, |stored| {
            if let PatchBody::Merge(patch) = body {
                check_version(&stored.object, patch)?;
            }
            let mut patched = stored.object.clone();
            apply_patch(body, &mut patched)?;
            keep_apart(&stored.object, &mut patched, subresource);
            take_changed(stored, patched, manager);
            Ok(())
        })?;
        Ok((self.objects[id].object.clone(), changed))
    }

    /// Replaces the object at `id` with `object`, which must carry its current
    /// resourceVersion; the status stays as it is.
    pub fn replace(
        &mut self,
        id: &ObjectId,
        object: &Value,
        manager: &str,
    ) -> Result<(Value, Option<Changed>), StoreError> {
        let changed = self.update(id, |stored| {
            check_version(&stored.object, object)?;
            let mut replaced = object.clone();
            for kept in [
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
            ] {
                if let Some(value) = stored.object["metadata"].get(kept) {
                    replaced["metadata"][kept] = value.clone();
                }
            }
            keep_apart(&stored.object, &mut replaced, None);
            take_changed(stored, replaced, manager);
            Ok(())
        })?;
        Ok((self.objects[id].object.clone(), changed))
    }
}

/// Applies `body` to `value` as the API server would; a failed JSON patch operation
/// (a `test` that does not hold) is `Invalid` and `value` is left as it was.
pub fn apply_patch(body: &PatchBody, value: &mut Value) -> Result<(), StoreError> {
    match body {
        PatchBody::Merge(patch) => json_patch::merge(value, patch),
        PatchBody::Json(ops) => {
            json_patch::patch(value, ops).map_err(|e| StoreError::Invalid(e.to_string()))?
        }
    }
    Ok(())
}

/// Refuses a write naming a resourceVersion the object is no longer at, worded as the
/// API server's conflict.
pub(super) fn check_version(current: &Value, written: &Value) -> Result<(), StoreError> {
    let wanted = written.pointer("/metadata/resourceVersion");
    match wanted.is_none_or(|v| Some(v) == current.pointer("/metadata/resourceVersion")) {
        true => Ok(()),
        false => Err(StoreError::Conflict(
            "the object has been modified; please apply your changes to the latest version \
             and try again"
                .into(),
        )),
    }
}

/// A write to the object leaves its status as it was; a write to its status leaves
/// everything else (the resourceVersion is the server's either way).
fn keep_apart(current: &Value, written: &mut Value, subresource: Option<&str>) {
    match subresource {
        Some("status") => {
            let status = written.get("status").cloned();
            *written = current.clone();
            match status {
                Some(status) => written["status"] = status,
                None => drop(written.as_object_mut().map(|o| o.remove("status"))),
            }
        }
        _ => match current.get("status") {
            Some(status) => written["status"] = status.clone(),
            None => drop(written.as_object_mut().map(|o| o.remove("status"))),
        },
    }
    written["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
}

/// Stores `written`, the fields it changed owned by `manager`.
fn take_changed(stored: &mut Stored, written: Value, manager: &str) {
    let before = fields::leaves(&stored.object);
    let after = fields::leaves(&written);
    for (path, _) in &before {
        if after.iter().all(|(p, _)| p != path) {
            stored.owners.release(path);
        }
    }
    for (path, value) in after {
        if !before.iter().any(|(p, v)| *p == path && *v == value) {
            stored.owners.take(manager, path);
        }
    }
    stored.object = written;
}
