//! Writes plugins' rights as RBAC YAML that `kubectl apply -f` takes: per plugin a
//! ServiceAccount, a ClusterRole for what is cluster-wide and a Role per namespace for
//! the rest, each with its binding; then the host's own rights. Stable: everything is
//! sorted, so the output of unchanged plugins never changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::rights::{PluginRights, Rights, Target};
use crate::kube::identity::ServiceAccounts;

/// Names of the identities: the plugins' ServiceAccounts, and the host's.
#[derive(Debug, Clone)]
pub struct Naming {
    /// Where the plugins' ServiceAccounts (and the host's) live, and their names.
    pub accounts: ServiceAccounts,
    /// The host's ServiceAccount, roles and bindings.
    pub host: String,
}

/// The whole document for `plugins` and the host that runs them.
pub fn render(plugins: &[PluginRights], host: &Rights, naming: &Naming) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# RBAC for wasm-controller-manager and its plugins, written by\n\
         # `wasm-controller-manager rbac` from the plugins' registrations. Each plugin acts\n\
         # as its own ServiceAccount (the host impersonates it), so this is all a plugin\n\
         # may do; the host itself may only list and watch what the plugins watch and\n\
         # RBAC itself, impersonate their ServiceAccounts, review their access and hold\n\
         # its Lease."
    );
    for plugin in plugins {
        let account = naming.accounts.name(&plugin.plugin);
        let what = format!("plugin {} {}", plugin.plugin, plugin.version);
        service_account(&mut out, &what, &account, &naming.accounts.namespace);
        for guessed in &plugin.guessed {
            let _ = writeln!(
                out,
                "# ({guessed} is not a built-in kind: its plural and namespaced scope are \
                 assumed)"
            );
        }
        roles(&mut out, &what, &plugin.rights, &account, naming);
    }
    roles(&mut out, "the host", host, &naming.host, naming);
    out
}

fn service_account(out: &mut String, what: &str, name: &str, namespace: &str) {
    let _ = write!(
        out,
        "---\n# {what}: its identity\napiVersion: v1\nkind: ServiceAccount\n\
         metadata:\n  name: {name}\n  namespace: {namespace}\n"
    );
}

/// A ClusterRole and binding for the cluster-wide rights, a Role and binding per
/// namespace for the others; all bound to the ServiceAccount `account`.
fn roles(out: &mut String, what: &str, rights: &Rights, account: &str, naming: &Naming) {
    let mut by_namespace: BTreeMap<Option<&str>, Vec<(&Target, &BTreeSet<&str>)>> = BTreeMap::new();
    for (target, verbs) in rights {
        let entry = by_namespace.entry(target.namespace.as_deref()).or_default();
        entry.push((target, verbs));
    }
    for (namespace, rules) in by_namespace {
        let (role, binding, meta) = match namespace {
            None => (
                "ClusterRole",
                "ClusterRoleBinding",
                format!("  name: {account}\n"),
            ),
            Some(ns) => (
                "Role",
                "RoleBinding",
                format!("  name: {account}\n  namespace: {ns}\n"),
            ),
        };
        let scope = namespace.map_or("cluster-wide".to_string(), |ns| format!("in {ns}"));
        let _ = write!(
            out,
            "---\n# {what}: its rights {scope}\napiVersion: rbac.authorization.k8s.io/v1\n\
             kind: {role}\nmetadata:\n{meta}rules:\n"
        );
        for (target, verbs) in rules {
            rule(out, target, verbs);
        }
        let _ = write!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\nmetadata:\n{meta}\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role}\n  name: {account}\n\
             subjects:\n  - kind: ServiceAccount\n    name: {account}\n    namespace: {}\n",
            naming.accounts.namespace
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
