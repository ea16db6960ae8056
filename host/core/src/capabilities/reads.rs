//! The reading capabilities — `get`, `list`, `list-first`, `count` — over the plugin's
//! watches that RBAC leaves open, and `get`'s live read of a kind declared but not
//! watched; every answer within the plugin's result size.

use std::sync::Arc;

use kube::api::DynamicObject;
use kube::core::{GroupVersionKind, Selector};

use super::{
    CapabilityError, ClusterAccess, Op, Selection, Target, list_call, list_selector, list_what,
};
use crate::contract::{Capability, Verb};

/// What one `list`, `list-first` or `count` reads.
struct Listing {
    /// What it names in errors (`v1/Pod in shop`).
    what: String,
    /// The open watches of the kind.
    watches: Vec<usize>,
    /// Only objects whose labels match.
    selector: Selector,
}

impl Listing {
    /// What the backend reads for it in `namespace`.
    fn of<'a>(&'a self, namespace: Option<&'a str>) -> Selection<'a> {
        Selection {
            watches: &self.watches,
            namespace,
            selector: &self.selector,
        }
    }
}

impl ClusterAccess {
    /// Of `matching`, the plugin's watches of `gvk` (for a namespace), those RBAC lets
    /// it read: an error naming the missing rule when every one is closed, and
    /// `not_watched` when there is none. `op` and `what` name the call.
    fn readable(
        &self,
        op: &str,
        what: &str,
        gvk: &GroupVersionKind,
        matching: Vec<usize>,
    ) -> Result<Vec<usize>, CapabilityError> {
        let Some(&first) = matching.first() else {
            return Err(self.declared.not_watched(op, what, gvk));
        };
        let open: Vec<usize> = (matching.into_iter())
            .filter(|index| self.granted.is_open(*index))
            .collect();
        if open.is_empty() {
            let lacking: Vec<String> = (self.granted.lacking(first).iter())
                .map(ToString::to_string)
                .collect();
            return Err(CapabilityError::Forbidden(format!(
                "{op} {what}: plugin {}'s ServiceAccount is not granted: {} (the host does \
                 not serve it this kind until RBAC grants it)",
                self.declared.plugin,
                lacking.join("; ")
            )));
        }
        Ok(open)
    }

    /// One object's JSON: from the caches of a watched kind, else from the backend if
    /// the plugin declared `get` on the kind (as the plugin, within its API rate).
    pub async fn get(&self, target: &Target) -> Result<Arc<str>, CapabilityError> {
        let matching = (self.backend).watches_of(&target.gvk, target.namespace.as_deref());
        if matching.is_empty() && self.declared.allows(Verb::Get, &target.gvk) {
            return self.get_live(target).await;
        }
        let what = target.to_string();
        let watches = self.readable(Capability::Get.name(), &what, &target.gvk, matching)?;
        let json = (self.backend.cached(target, &watches))
            .ok_or_else(|| CapabilityError::NotFound(format!("get {target}: not in the cache")))?;
        self.declared
            .check_result_size(&format!("get {target}"), json.len())?;
        Ok(json)
    }

    /// A live read of a kind the plugin does not watch: counted against its API rate
    /// like a write, answered without managedFields, bounded by its result size.
    async fn get_live(&self, target: &Target) -> Result<Arc<str>, CapabilityError> {
        let op = Op::on(Capability::Get.name(), target);
        self.declared.budget.api_request().await;
        let found =
            (self.backend.get(&op, target).await).map_err(|e| self.review_if_forbidden(e))?;
        Ok(self.answer(&op, found)?.into())
    }

    /// JSON of the cached objects of `gvk` in `namespace` (all if none) matching
    /// `label_selector`, by namespace and name: all of them, or the first `limit`.
    pub async fn list(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Arc<str>>, CapabilityError> {
        let op = list_call(limit).name();
        let listing = self.listing(op, gvk, namespace, label_selector)?;
        let found = self.backend.select(listing.of(namespace), limit).await;
        let bytes = found.iter().map(|json| json.len()).sum();
        self.declared
            .check_result_size(&format!("{op} {}", listing.what), bytes)?;
        Ok(found)
    }

    /// How many objects `list` would return, copying none.
    pub async fn count(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<usize, CapabilityError> {
        let listing = self.listing(Capability::Count.name(), gvk, namespace, label_selector)?;
        Ok(self.backend.count(listing.of(namespace)).await)
    }

    /// What a `list`, `list-first` or `count` (`op`) reads: the open watches of `gvk`,
    /// then the selector, parsed after the checks that need no parsing.
    fn listing(
        &self,
        op: &str,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Listing, CapabilityError> {
        let what = list_what(gvk, namespace);
        let watches = self.readable(op, &what, gvk, self.backend.watches_of(gvk, namespace))?;
        let selector = list_selector(op, &what, label_selector)?;
        Ok(Listing {
            what,
            watches,
            selector,
        })
    }

    /// A stored object as the plugin gets it: without managedFields, within its
    /// result size.
    pub(super) fn answer(
        &self,
        op: &Op,
        mut object: DynamicObject,
    ) -> Result<String, CapabilityError> {
        object.metadata.managed_fields = None;
        let json = serde_json::to_string(&object).map_err(|e| op.host_fault(e))?;
        self.declared.check_result_size(op, json.len())?;
        Ok(json)
    }
}
