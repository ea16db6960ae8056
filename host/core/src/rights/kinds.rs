//! What RBAC needs to know of a kind without asking a cluster: its resource name
//! (plural) and whether it is namespaced. Built-in kinds come from k8s-openapi's type
//! metadata; any other kind (a custom resource) is pluralised as kube does and assumed
//! namespaced, and says so.

use std::any::TypeId;
use std::sync::OnceLock;

use k8s_openapi::api::{
    apps, autoscaling, batch, coordination, core, discovery, events, networking, policy, rbac,
    storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::{NamespaceResourceScope, Resource};
use kube::core::{ApiResource, GroupVersionKind};

/// A kind as RBAC rules name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacKind {
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource name, the plural (`pods`).
    pub resource: String,
    /// Namespaced (Pod) or cluster-scoped (Node).
    pub namespaced: bool,
    /// False when the kind is not built in and its plural and scope were guessed.
    pub known: bool,
}

/// (group, kind, plural, namespaced) of a built-in type.
type Entry = (&'static str, &'static str, &'static str, bool);

fn entry<K: Resource>() -> Entry
where
    K::Scope: 'static,
{
    let namespaced = TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>();
    (K::GROUP, K::KIND, K::URL_PATH_SEGMENT, namespaced)
}

/// The built-in kinds controllers commonly watch or write.
fn builtin() -> &'static [Entry] {
    static TABLE: OnceLock<Vec<Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        use core::v1 as c;
        vec![
            entry::<c::Pod>(),
            entry::<c::Node>(),
            entry::<c::Namespace>(),
            entry::<c::ConfigMap>(),
            entry::<c::Secret>(),
            entry::<c::Service>(),
            entry::<c::ServiceAccount>(),
            entry::<c::Endpoints>(),
            entry::<c::Event>(),
            entry::<c::PersistentVolume>(),
            entry::<c::PersistentVolumeClaim>(),
            entry::<c::ReplicationController>(),
            entry::<c::ResourceQuota>(),
            entry::<c::LimitRange>(),
            entry::<apps::v1::Deployment>(),
            entry::<apps::v1::ReplicaSet>(),
            entry::<apps::v1::StatefulSet>(),
            entry::<apps::v1::DaemonSet>(),
            entry::<apps::v1::ControllerRevision>(),
            entry::<batch::v1::Job>(),
            entry::<batch::v1::CronJob>(),
            entry::<networking::v1::Ingress>(),
            entry::<networking::v1::IngressClass>(),
            entry::<networking::v1::NetworkPolicy>(),
            entry::<rbac::v1::Role>(),
            entry::<rbac::v1::RoleBinding>(),
            entry::<rbac::v1::ClusterRole>(),
            entry::<rbac::v1::ClusterRoleBinding>(),
            entry::<coordination::v1::Lease>(),
            entry::<discovery::v1::EndpointSlice>(),
            entry::<events::v1::Event>(),
            entry::<policy::v1::PodDisruptionBudget>(),
            entry::<storage::v1::StorageClass>(),
            entry::<autoscaling::v2::HorizontalPodAutoscaler>(),
            entry::<CustomResourceDefinition>(),
        ]
    })
}

/// The RBAC view of `gvk`.
pub fn rbac_kind(gvk: &GroupVersionKind) -> RbacKind {
    let found = builtin()
        .iter()
        .find(|(group, kind, _, _)| *group == gvk.group && *kind == gvk.kind);
    match found {
        Some((group, _, plural, namespaced)) => RbacKind {
            group: group.to_string(),
            resource: plural.to_string(),
            namespaced: *namespaced,
            known: true,
        },
        None => RbacKind {
            group: gvk.group.clone(),
            resource: ApiResource::from_gvk(gvk).plural,
            namespaced: true,
            known: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_have_their_plural_and_scope() {
        let node = rbac_kind(&GroupVersionKind::gvk("", "v1", "Node"));
        assert_eq!(
            (node.resource.as_str(), node.namespaced, node.known),
            ("nodes", false, true)
        );
        let deployment = rbac_kind(&GroupVersionKind::gvk("apps", "v1", "Deployment"));
        assert_eq!(deployment.group, "apps");
        assert_eq!(
            (deployment.resource.as_str(), deployment.namespaced),
            ("deployments", true)
        );
        let policy = rbac_kind(&GroupVersionKind::gvk(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
        ));
        assert_eq!(policy.resource, "networkpolicies");
    }

    #[test]
    fn other_kinds_are_pluralised_and_assumed_namespaced() {
        let app = rbac_kind(&GroupVersionKind::gvk(
            "demo.example.com",
            "v1alpha1",
            "WebApp",
        ));
        assert_eq!(app.resource, "webapps");
        assert!(app.namespaced && !app.known);
    }
}
