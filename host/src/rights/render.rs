//! Writes plugins' rights as RBAC YAML that `kubectl apply -f` takes on a fresh
//! cluster: the namespace of the accounts, the host's own rights (the same for any
//! plugins), then per plugin a ServiceAccount, a ClusterRole for what is cluster-wide
//! and a Role per namespace for the rest, each with its binding, and the host's rights
//! for that plugin (listing what it watches, impersonating its account).
//!
//! Every object of one plugin carries the label [`PLUGIN_LABEL`], so one plugin's RBAC
//! can be granted later without changing another's, and removed alone: the same output
//! piped to `kubectl delete -l wasm-controller-manager.io/plugin=NAME -f -`. (The host's
//! rights used to be one role for all plugins, so granting one plugin replaced every
//! other plugin's part of it.) Stable: everything is sorted, so the output of unchanged
//! plugins never changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::identity::{PLUGIN_LABEL, ServiceAccounts};
use super::needed::{PluginRights, Rights, Target};
use super::{host_rights, host_rights_for};

/// A Pod Security Standard level: the label `pod-security.kubernetes.io/enforce` on the
/// namespace. Written on the Namespace itself (not added by `deploy/`), so applying one
/// more plugin's RBAC later never drops it (`kubectl apply` removes what was applied
/// before and is missing now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PodSecurity {
    /// Anything goes: for a namespace shared with Pods that meet no profile.
    Privileged,
    /// No known privilege escalation.
    Baseline,
    /// Hardened: what the host's Pods meet.
    Restricted,
}

impl PodSecurity {
    /// The level as the label's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Privileged => "privileged",
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }
}

/// Names of the identities: the plugins' ServiceAccounts, and the host's.
#[derive(Debug, Clone)]
pub struct Naming {
    /// Where the plugins' ServiceAccounts (and the host's) live, and their names.
    pub accounts: ServiceAccounts,
    /// The host's ServiceAccount, roles and bindings.
    pub host: String,
    /// What the namespace enforces of Pods.
    pub pod_security: PodSecurity,
}

/// One set of roles and bindings to write.
struct Roles<'a> {
    /// Whose rights they are, for the comment.
    what: &'a str,
    rights: &'a Rights,
    /// The roles' and bindings' name.
    name: &'a str,
    /// The ServiceAccount they are bound to.
    subject: &'a str,
    /// The plugin whose RBAC they are part of (labelled so), if any.
    plugin: Option<&'a str>,
}

/// The whole document for `plugins` and the host that runs them.
pub fn render(plugins: &[PluginRights], naming: &Naming) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# RBAC for wasm-controller-manager and its plugins, written by\n\
         # `wasm-controller-manager rbac` from the plugins' registrations. Each plugin acts\n\
         # as its own ServiceAccount (the host impersonates it), so this is all a plugin\n\
         # may do; the host itself may only list and watch what the plugins watch and\n\
         # RBAC itself, impersonate their ServiceAccounts, review their access, hold\n\
         # its Lease and record Events about plugins' states. Apply it with\n\
         # `kubectl apply -f -`, and another plugin's later the\n\
         # same way: each plugin's objects are its own. To remove one plugin's alone:\n\
         #   wasm-controller-manager rbac P.wasm | kubectl delete -l {PLUGIN_LABEL}=P -f -\n\
         # (deleting all of it would remove the namespace too)."
    );
    let namespace = &naming.accounts.namespace;
    let _ = write!(
        out,
        "---\n# the namespace of the host and the plugins' ServiceAccounts\napiVersion: v1\n\
         kind: Namespace\nmetadata:\n  name: {namespace}\n  labels:\n    \
         pod-security.kubernetes.io/enforce: {}\n",
        naming.pod_security.as_str()
    );
    let host = host_rights(naming);
    roles(
        &mut out,
        &Roles {
            what: "the host",
            rights: &host,
            name: &naming.host,
            subject: &naming.host,
            plugin: None,
        },
        naming,
    );
    for plugin in plugins {
        let account = naming.accounts.name(&plugin.plugin);
        let what = format!("plugin {} {}", plugin.plugin, plugin.version);
        let label = labels(Some(&plugin.plugin));
        let _ = write!(
            out,
            "---\n# {what}: its identity\napiVersion: v1\nkind: ServiceAccount\n\
             metadata:\n  name: {account}\n  namespace: {namespace}\n{label}"
        );
        for guessed in &plugin.guessed {
            let _ = writeln!(
                out,
                "# ({guessed} is not a built-in kind: its plural and namespaced scope are \
                 assumed)"
            );
        }
        let own = Roles {
            what: &what,
            rights: &plugin.rights,
            name: &account,
            subject: &account,
            plugin: Some(&plugin.plugin),
        };
        roles(&mut out, &own, naming);
        let for_it = host_rights_for(plugin, naming);
        let name = format!("{}:{account}", naming.host);
        let what = format!("the host, for plugin {}", plugin.plugin);
        let host = Roles {
            what: &what,
            rights: &for_it,
            name: &name,
            subject: &naming.host,
            plugin: Some(&plugin.plugin),
        };
        roles(&mut out, &host, naming);
    }
    out
}

/// The `labels:` of an object of `plugin`'s RBAC (nothing for the host's own).
fn labels(plugin: Option<&str>) -> String {
    plugin.map_or_else(String::new, |p| {
        format!("  labels:\n    {PLUGIN_LABEL}: {p}\n")
    })
}

/// A ClusterRole and binding for the cluster-wide rights, a Role and binding per
/// namespace for the others.
fn roles(out: &mut String, roles: &Roles, naming: &Naming) {
    let mut by_namespace: BTreeMap<Option<&str>, Vec<(&Target, &BTreeSet<&str>)>> = BTreeMap::new();
    for (target, verbs) in roles.rights {
        let entry = by_namespace.entry(target.namespace.as_deref()).or_default();
        entry.push((target, verbs));
    }
    let (name, label) = (roles.name, labels(roles.plugin));
    for (namespace, rules) in by_namespace {
        let (role, binding, meta) = match namespace {
            None => (
                "ClusterRole",
                "ClusterRoleBinding",
                format!("  name: {name}\n{label}"),
            ),
            Some(ns) => (
                "Role",
                "RoleBinding",
                format!("  name: {name}\n  namespace: {ns}\n{label}"),
            ),
        };
        let scope = namespace.map_or("cluster-wide".to_string(), |ns| format!("in {ns}"));
        let _ = write!(
            out,
            "---\n# {}: its rights {scope}\napiVersion: rbac.authorization.k8s.io/v1\n\
             kind: {role}\nmetadata:\n{meta}rules:\n",
            roles.what
        );
        for (target, verbs) in rules {
            rule(out, target, verbs);
        }
        let _ = write!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\nmetadata:\n{meta}\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role}\n  name: {name}\n\
             subjects:\n  - kind: ServiceAccount\n    name: {}\n    namespace: {}\n",
            roles.subject, naming.accounts.namespace
        );
    }
}

fn rule(out: &mut String, target: &Target, verbs: &BTreeSet<&str>) {
    let verbs: Vec<&str> = verbs.iter().copied().collect();
    let _ = write!(
        out,
        "  - apiGroups: [\"{}\"]\n    resources: [{}]\n",
        target.group, target.resource
    );
    if !target.names.is_empty() {
        let _ = writeln!(out, "    resourceNames: [{}]", target.names.join(", "));
    }
    let _ = writeln!(out, "    verbs: [{}]", verbs.join(", "));
}
