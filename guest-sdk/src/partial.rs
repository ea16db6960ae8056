//! Objects read for their metadata alone: `PartialObjectMeta<Pod>` is a Pod's
//! `metadata` (names, labels, annotations, owners, finalizers) and nothing else.
//!
//! A controller that reads only metadata (a metadata-only watch, say) decodes far
//! less with it than with the full `k8s-openapi` type, and a plugin that never
//! decodes the full type does not carry its decoder: pod-counter's component is a
//! fraction of the size, so the host compiles it faster. It works wherever a kind is
//! expected (`cluster::list::<PartialObjectMeta<Pod>>`, `ObjectRef::of`), as in
//! kube-rs.

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::Deserialize;

/// The metadata of an object of kind `K`, without its spec or status.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PartialObjectMeta<K> {
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(skip)]
    kind: PhantomData<fn() -> K>,
}

impl<K> PartialObjectMeta<K> {
    /// The metadata of an object of kind `K`: for tests of a plugin's own logic.
    pub fn new(metadata: ObjectMeta) -> PartialObjectMeta<K> {
        PartialObjectMeta {
            metadata,
            kind: PhantomData,
        }
    }

    /// Its labels (none: empty).
    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        static NONE: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        self.metadata.labels.as_ref().unwrap_or(&NONE)
    }
}

impl<K: Resource> Resource for PartialObjectMeta<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: Resource> Metadata for PartialObjectMeta<K> {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::{Gvk, ObjectRef};

    #[test]
    fn a_pod_is_read_for_its_metadata_and_keeps_its_kind() {
        let json = r#"{"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":"web-0","namespace":"shop","labels":{"app":"web"}},
            "spec":{"containers":[{"name":"web","image":"nginx"}]},"status":{"phase":"Running"}}"#;
        let pod: PartialObjectMeta<Pod> = serde_json::from_str(json).expect("a Pod");
        assert_eq!(pod.labels().get("app").map(String::as_str), Some("web"));
        let target = ObjectRef::of(&pod);
        assert_eq!(target.kind, Gvk::of::<Pod>());
        assert_eq!(target.namespace.as_deref(), Some("shop"));
        assert_eq!(target.name, "web-0");
    }

    #[test]
    fn no_labels_read_as_empty() {
        let pod = PartialObjectMeta::<Pod>::new(ObjectMeta::default());
        assert!(pod.labels().is_empty());
    }
}
