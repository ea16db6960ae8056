//! Constructors and builders on the contract's types, so plugins never spell out
//! raw records.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};

use crate::{
    Gvk, KeyMapping, Metric, MetricKind, ObjectRef, Permission, Registration, Request, Watch,
};

impl Gvk {
    /// The kind of a `k8s-openapi` type: `Gvk::of::<Pod>()`.
    pub fn of<K: Resource>() -> Gvk {
        Gvk::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// Any kind, including custom resources: `Gvk::new("apps", "v1", "Deployment")`.
    pub fn new(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }
}

impl ObjectRef {
    /// A reference to a `K` by namespace (none if cluster-scoped) and name.
    pub fn new<K: Resource>(namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            kind: Gvk::of::<K>(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// A reference to an object already read.
    pub fn of<K: Resource + Metadata<Ty = ObjectMeta>>(obj: &K) -> ObjectRef {
        let meta = obj.metadata();
        ObjectRef::new::<K>(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

impl Request {
    /// The object this request names, if it is not a fixed key.
    pub fn object(&self) -> Option<ObjectRef> {
        self.kind.clone().map(|kind| ObjectRef {
            kind,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        })
    }
}

impl Watch {
    /// Every object of `K` in all namespaces, each mapped to its own key.
    pub fn all<K: Resource>() -> Watch {
        Watch::kind(Gvk::of::<K>())
    }

    /// A watch of any kind given as a [`Gvk`] (custom resources).
    pub fn kind(kind: Gvk) -> Watch {
        Watch {
            kind,
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            metadata_only: false,
            predicates: Vec::new(),
            maps_to: KeyMapping::Object,
        }
    }

    /// Only objects in `namespace`; call again to add another namespace (each is an
    /// informer of its own, and counts as a watch against the host's limit).
    pub fn in_namespace(mut self, namespace: &str) -> Watch {
        self.namespaces.push(namespace.to_string());
        self
    }

    /// Only objects in these namespaces.
    pub fn in_namespaces(self, namespaces: &[&str]) -> Watch {
        namespaces.iter().fold(self, |w, ns| w.in_namespace(ns))
    }

    /// Only objects matching a label selector such as `app=web,tier in (a,b)`.
    pub fn labels(mut self, selector: &str) -> Watch {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// Only objects matching a field selector such as `spec.nodeName=node-1`,
    /// evaluated by the API server (which says which fields a kind supports).
    pub fn fields(mut self, selector: &str) -> Watch {
        self.field_selector = Some(selector.to_string());
        self
    }

    /// Hold only `apiVersion`, `kind` and `metadata` of the objects: `get` and `list`
    /// return them so (deserialise into the full type: spec and status are `None`).
    pub fn metadata_only(mut self) -> Watch {
        self.metadata_only = true;
        self
    }

    /// Queue an update only when `predicate` holds (or another one given): creates,
    /// deletes and resyncs always queue.
    pub fn when(mut self, predicate: Predicate) -> Watch {
        self.predicates.push(predicate.as_str().to_string());
        self
    }

    /// Every change wakes the one key `key` (for aggregates such as counts).
    pub fn fixed_key(mut self, key: &str) -> Watch {
        self.maps_to = KeyMapping::Fixed(key.to_string());
        self
    }

    /// A change wakes the object's controller owner of kind `O`.
    pub fn owned_by<O: Resource>(self) -> Watch {
        self.owned_by_kind(Gvk::of::<O>())
    }

    /// A change wakes the object's controller owner of the given kind.
    pub fn owned_by_kind(mut self, owner: Gvk) -> Watch {
        self.maps_to = KeyMapping::ControllerOwner(owner);
        self
    }
}

/// The update predicates a watch may have and the verbs a plugin may declare on a kind,
/// named and spelled as the host spells them (one crate for both).
pub use wcm_contract_words::{Predicate, Verb};

impl Registration {
    /// A registration with no watches yet; `name` must be a DNS-1123 label.
    pub fn new(name: &str, version: &str) -> Registration {
        Registration {
            name: name.to_string(),
            version: version.to_string(),
            watches: Vec::new(),
            permissions: Vec::new(),
            max_concurrent_reconciles: 0,
            resync_period_ms: None,
            metrics: Vec::new(),
        }
    }

    /// Adds a watch.
    pub fn watch(mut self, watch: Watch) -> Registration {
        self.watches.push(watch);
        self
    }

    /// Declares verbs on `K` beyond reading what is watched.
    pub fn permit<K: Resource>(self, verbs: &[Verb]) -> Registration {
        self.permit_kind(Gvk::of::<K>(), verbs)
    }

    /// Declares verbs on any kind.
    pub fn permit_kind(mut self, kind: Gvk, verbs: &[Verb]) -> Registration {
        self.permissions.push(Permission {
            kind,
            verbs: verbs.iter().map(|v| v.as_str().to_string()).collect(),
        });
        self
    }

    /// Re-queues every watched object's key every `period`, changed or not.
    pub fn resync_every(mut self, period: std::time::Duration) -> Registration {
        self.resync_period_ms = Some(u64::try_from(period.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Declares a counter (exported as `wcm_plugin_<plugin>_<name>_total`) whose
    /// updates give one value for each of `labels`; see [`crate::metrics`].
    pub fn counter(self, name: &str, help: &str, labels: &[&str]) -> Registration {
        self.metric(name, help, MetricKind::Counter, labels, &[])
    }

    /// Declares a gauge.
    pub fn gauge(self, name: &str, help: &str, labels: &[&str]) -> Registration {
        self.metric(name, help, MetricKind::Gauge, labels, &[])
    }

    /// Declares a histogram with these upper bucket bounds (empty: 5 ms to 10 s).
    pub fn histogram(
        self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> Registration {
        self.metric(name, help, MetricKind::Histogram, labels, buckets)
    }

    fn metric(
        mut self,
        name: &str,
        help: &str,
        kind: MetricKind,
        labels: &[&str],
        buckets: &[f64],
    ) -> Registration {
        self.metrics.push(Metric {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            buckets: buckets.to_vec(),
        });
        self
    }

    /// How many keys may be reconciled at once (the host caps it).
    pub fn max_concurrent_reconciles(mut self, n: u32) -> Registration {
        self.max_concurrent_reconciles = n;
        self
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Node, Pod};

    use super::*;

    #[test]
    fn gvk_comes_from_the_k8s_openapi_type() {
        assert_eq!(Gvk::of::<Pod>(), Gvk::new("", "v1", "Pod"));
        assert_eq!(
            Gvk::of::<Deployment>(),
            Gvk::new("apps", "v1", "Deployment")
        );
    }

    #[test]
    fn the_registration_builder_fills_every_field() {
        let reg = Registration::new("pod-counter", "1.0.0")
            .watch(Watch::all::<Pod>().fixed_key("count"))
            .watch(
                Watch::all::<Pod>()
                    .in_namespaces(&["a", "b"])
                    .labels("x=y")
                    .fields("spec.nodeName=n1")
                    .metadata_only()
                    .when(Predicate::GenerationChanged)
                    .when(Predicate::LabelsChanged)
                    .owned_by::<Deployment>(),
            )
            .permit::<Node>(&[Verb::Patch])
            .max_concurrent_reconciles(2)
            .resync_every(std::time::Duration::from_secs(90));
        assert_eq!(reg.watches[0].maps_to, KeyMapping::Fixed("count".into()));
        assert_eq!(reg.watches[1].namespaces, ["a", "b"]);
        assert_eq!(reg.watches[1].label_selector.as_deref(), Some("x=y"));
        assert_eq!(
            reg.watches[1].field_selector.as_deref(),
            Some("spec.nodeName=n1")
        );
        assert!(reg.watches[1].metadata_only && !reg.watches[0].metadata_only);
        assert_eq!(
            reg.watches[1].predicates,
            ["generation-changed", "labels-changed"]
        );
        assert_eq!(
            reg.watches[1].maps_to,
            KeyMapping::ControllerOwner(Gvk::of::<Deployment>())
        );
        assert_eq!(reg.permissions[0].kind, Gvk::of::<Node>());
        assert_eq!(reg.permissions[0].verbs, ["patch"]);
        assert_eq!(reg.max_concurrent_reconciles, 2);
        assert_eq!(reg.resync_period_ms, Some(90_000));
    }

    #[test]
    fn object_refs_are_built_from_objects_and_requests() {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.name = Some("web".into());
        assert_eq!(
            ObjectRef::of(&pod),
            ObjectRef::new::<Pod>(Some("ns"), "web")
        );
        let req = Request {
            kind: Some(Gvk::of::<Pod>()),
            namespace: Some("ns".into()),
            name: "web".into(),
        };
        assert_eq!(req.object(), Some(ObjectRef::of(&pod)));
        let fixed = Request {
            kind: None,
            namespace: None,
            name: "count".into(),
        };
        assert_eq!(fixed.object(), None);
    }
}
