//! The API rights a plugin needs, derived from its registration: get/list/watch of
//! what it watches, the verbs it declared on the kinds it declared them for, and
//! Events about the objects it handles. What `wasm-controller-manager rbac` prints.

use std::collections::{BTreeMap, BTreeSet};

use super::kinds::{RbacKind, rbac_kind};
use crate::contract::Registration;
use crate::keys::from_wit_gvk;

/// Where one set of verbs applies: a resource in a namespace, or cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleTarget {
    /// `None`: cluster-wide (a ClusterRole); else a Role in that namespace.
    pub namespace: Option<String>,
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource (plural), or `resource/subresource`.
    pub resource: String,
    /// Object names the verbs are limited to; empty for all.
    pub names: Vec<String>,
}

impl RuleTarget {
    /// All objects of `group`/`resource` in `namespace` (`None`: cluster-wide).
    pub fn new(namespace: Option<String>, group: &str, resource: &str) -> RuleTarget {
        RuleTarget {
            namespace,
            group: group.to_string(),
            resource: resource.to_string(),
            names: Vec::new(),
        }
    }
}

/// Verbs per target, sorted, so the output is stable.
pub type Rights = BTreeMap<RuleTarget, BTreeSet<&'static str>>;

/// One plugin's identity and rights.
#[derive(Debug, Clone)]
pub struct PluginRights {
    /// The registered name.
    pub plugin: String,
    /// The registered version.
    pub version: String,
    /// What it needs, watches and writes together.
    pub rights: Rights,
    /// The part that comes from its watches (what the host itself must list and watch).
    pub watches: Rights,
    /// Resources whose plural and scope were guessed (not built-in kinds).
    pub guessed: BTreeSet<String>,
}

/// Events the host records for plugins (events.k8s.io; kube-runtime's recorder puts the
/// Events of cluster-scoped objects in `default`).
const EVENTS_GROUP: &str = "events.k8s.io";
const CLUSTER_EVENTS_NAMESPACE: &str = "default";

const READ: [&str; 3] = ["get", "list", "watch"];

/// Derives the rights `registration` needs.
///
/// Namespaced kinds are granted where the plugin works: in each namespace its
/// namespaced watches are limited to (a Role in each), or cluster-wide if one of them
/// watches all namespaces.
/// Cluster-scoped kinds (Nodes) are always cluster-wide.
pub fn plugin_rights(registration: &Registration) -> PluginRights {
    plugin_rights_with(registration, &rbac_kind)
}

/// [`plugin_rights`] with the resource names and scopes of `lookup` (the running host
/// asks API discovery, which also knows custom resources).
pub fn plugin_rights_with(
    registration: &Registration,
    lookup: &dyn Fn(&kube::core::GroupVersionKind) -> RbacKind,
) -> PluginRights {
    let mut builder = Builder {
        lookup,
        homes: None,
        rights: Rights::new(),
        watches: Rights::new(),
        guessed: BTreeSet::new(),
    };
    let watched: Vec<(RbacKind, Option<String>)> = (registration.watches.iter())
        .flat_map(|watch| {
            let kind = builder.kind(&from_wit_gvk(&watch.kind));
            (watch.informer_namespaces().into_iter())
                .map(move |namespace| (kind.clone(), namespace.filter(|_| kind.namespaced)))
        })
        .collect();
    builder.homes = home_namespaces(&watched);
    for (kind, namespace) in watched {
        for verb in READ {
            let target = RuleTarget::new(namespace.clone(), &kind.group, &kind.resource);
            builder.watches.entry(target).or_default().insert(verb);
        }
        builder.events_about(&kind, namespace);
    }
    for permission in &registration.permissions {
        let kind = builder.kind(&from_wit_gvk(&permission.kind));
        for namespace in builder.homes_of(&kind) {
            for verb in permission.known_verbs() {
                let (subresource, verbs) = crate::contract::api_verbs(verb);
                let resource = match subresource {
                    Some(sub) => format!("{}/{sub}", kind.resource),
                    None => kind.resource.clone(),
                };
                let target = RuleTarget::new(namespace.clone(), &kind.group, &resource);
                builder.rights.entry(target).or_default().extend(verbs);
            }
            builder.events_about(&kind, namespace);
        }
    }
    builder.finish(registration)
}

struct Builder<'a> {
    lookup: &'a dyn Fn(&kube::core::GroupVersionKind) -> RbacKind,
    /// The namespaces the plugin works in, or `None` for everywhere.
    homes: Option<Vec<String>>,
    rights: Rights,
    watches: Rights,
    guessed: BTreeSet<String>,
}

impl Builder<'_> {
    fn kind(&mut self, gvk: &kube::core::GroupVersionKind) -> RbacKind {
        let kind = (self.lookup)(gvk);
        if !kind.known {
            self.guessed
                .insert(format!("{}.{}", kind.resource, kind.group));
        }
        kind
    }

    /// Where rights on `kind` apply: each home namespace for a namespaced kind when
    /// the plugin has homes, else cluster-wide (`None`).
    fn homes_of(&self, kind: &RbacKind) -> Vec<Option<String>> {
        match (&self.homes, kind.namespaced) {
            (Some(homes), true) => homes.iter().cloned().map(Some).collect(),
            _ => vec![None],
        }
    }

    /// Events about objects of `kind` in `namespace` (`None`: any namespace).
    fn events_about(&mut self, kind: &RbacKind, namespace: Option<String>) {
        let namespace = match kind.namespaced {
            true => namespace,
            false => Some(CLUSTER_EVENTS_NAMESPACE.to_string()),
        };
        let entry = self
            .rights
            .entry(RuleTarget::new(namespace, EVENTS_GROUP, "events"));
        entry.or_default().extend(["create", "patch"]);
    }

    fn finish(mut self, registration: &Registration) -> PluginRights {
        for (target, verbs) in &self.watches {
            self.rights.entry(target.clone()).or_default().extend(verbs);
        }
        drop_subsumed(&mut self.rights);
        PluginRights {
            plugin: registration.name.clone(),
            version: registration.version.clone(),
            rights: self.rights,
            watches: self.watches,
            guessed: self.guessed,
        }
    }
}

/// Removes namespaced grants a cluster-wide one already covers (Events about Nodes in
/// `default` when Events may be written everywhere).
pub(super) fn drop_subsumed(rights: &mut Rights) {
    let cluster_wide = rights.clone();
    rights.retain(|target, verbs| {
        let Some(_) = target.namespace else {
            return true;
        };
        let everywhere = RuleTarget {
            namespace: None,
            ..target.clone()
        };
        !cluster_wide
            .get(&everywhere)
            .is_some_and(|all| all.is_superset(verbs))
    });
}

/// The namespaces the plugin's watches of namespaced kinds are limited to, if every
/// such watch names its namespaces; `None` (cluster-wide) if one watches all of them
/// or there is no such watch.
fn home_namespaces(watched: &[(RbacKind, Option<String>)]) -> Option<Vec<String>> {
    let namespaces: BTreeSet<Option<&str>> = watched
        .iter()
        .filter(|(kind, _)| kind.namespaced)
        .map(|(_, namespace)| namespace.as_deref())
        .collect();
    if namespaces.is_empty() || namespaces.contains(&None) {
        return None;
    }
    Some(
        namespaces
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect(),
    )
}
