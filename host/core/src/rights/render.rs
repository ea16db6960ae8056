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

use std::collections::BTreeMap;
use std::fmt::Write;

use super::identity::{PLUGIN_LABEL, ServiceAccounts};
use super::needed::{PluginRights, Rights, RuleTarget};
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

/// One role — cluster-wide, or in one namespace — and its binding to one
/// ServiceAccount: the unit both renderings write (`kubectl` YAML here, chart values
/// in `chart_values`), so what RBAC a plugin gets is decided once.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSet {
    /// Whose rights they are and where, for a comment ("plugin x 0.1.0: its rights in
    /// default").
    pub what: String,
    /// The role's and binding's name.
    pub name: String,
    /// `None`: a ClusterRole and ClusterRoleBinding.
    pub namespace: Option<String>,
    /// The ServiceAccount bound (in the accounts' namespace).
    pub subject: String,
    /// The plugin whose RBAC it is part of (labelled so), if any.
    pub plugin: Option<String>,
    /// The rules, sorted.
    pub rules: Vec<(RuleTarget, Vec<&'static str>)>,
}

/// One plugin's ServiceAccount and everything bound for it.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginPart {
    /// The plugin's name.
    pub plugin: String,
    /// Its registered version, for a comment.
    pub version: String,
    /// Its ServiceAccount.
    pub account: String,
    /// Resources whose plural and scope were guessed.
    pub guessed: Vec<String>,
    /// Its own roles, then the host's roles for it.
    pub roles: Vec<RoleSet>,
}

/// The RBAC of a host and its plugins, decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The namespace of the accounts.
    pub namespace: String,
    /// What the namespace enforces of Pods.
    pub pod_security: PodSecurity,
    /// The host's ServiceAccount.
    pub host: String,
    /// The prefix of the plugins' ServiceAccounts, which the host is told
    /// (`--plugin-service-account-prefix`) to find them.
    pub account_prefix: String,
    /// The host's own roles.
    pub host_roles: Vec<RoleSet>,
    /// Each plugin's part.
    pub plugins: Vec<PluginPart>,
}

/// The RBAC of `plugins` and of the host that runs them.
pub fn document(plugins: &[PluginRights], naming: &Naming) -> Document {
    let host_roles = role_sets(
        "the host",
        &host_rights(naming),
        &naming.host,
        &naming.host,
        None,
    );
    let plugins = plugins
        .iter()
        .map(|plugin| {
            let account = naming.accounts.name(&plugin.plugin);
            let what = format!("plugin {} {}", plugin.plugin, plugin.version);
            let name = Some(plugin.plugin.as_str());
            let mut roles = role_sets(&what, &plugin.rights, &account, &account, name);
            let for_it = host_rights_for(plugin, naming);
            let what = format!("the host, for plugin {}", plugin.plugin);
            let host_name = format!("{}:{account}", naming.host);
            roles.extend(role_sets(&what, &for_it, &host_name, &naming.host, name));
            PluginPart {
                plugin: plugin.plugin.clone(),
                version: plugin.version.clone(),
                account,
                guessed: plugin.guessed.iter().cloned().collect(),
                roles,
            }
        })
        .collect();
    Document {
        namespace: naming.accounts.namespace.clone(),
        pod_security: naming.pod_security,
        host: naming.host.clone(),
        account_prefix: naming.accounts.prefix.clone(),
        host_roles,
        plugins,
    }
}

/// A role set per namespace of `rights` (cluster-wide first).
fn role_sets(
    whose: &str,
    rights: &Rights,
    name: &str,
    subject: &str,
    plugin: Option<&str>,
) -> Vec<RoleSet> {
    let mut by_namespace: BTreeMap<Option<&str>, Vec<(RuleTarget, Vec<&'static str>)>> =
        BTreeMap::new();
    for (target, verbs) in rights {
        let entry = by_namespace.entry(target.namespace.as_deref()).or_default();
        entry.push((target.clone(), verbs.iter().copied().collect()));
    }
    (by_namespace.into_iter())
        .map(|(namespace, rules)| {
            let scope = namespace.map_or("cluster-wide".to_string(), |ns| format!("in {ns}"));
            RoleSet {
                what: format!("{whose}: its rights {scope}"),
                name: name.to_string(),
                namespace: namespace.map(str::to_string),
                subject: subject.to_string(),
                plugin: plugin.map(str::to_string),
                rules,
            }
        })
        .collect()
}

/// The whole document for `plugins` and the host that runs them, as `kubectl apply`
/// takes it.
pub fn render(plugins: &[PluginRights], naming: &Naming) -> String {
    let document = document(plugins, naming);
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
    let namespace = &document.namespace;
    let _ = write!(
        out,
        "---\n# the namespace of the host and the plugins' ServiceAccounts\napiVersion: v1\n\
         kind: Namespace\nmetadata:\n  name: {namespace}\n  labels:\n    \
         pod-security.kubernetes.io/enforce: {}\n",
        document.pod_security.as_str()
    );
    for set in &document.host_roles {
        role_set(&mut out, set, namespace);
    }
    for part in &document.plugins {
        let (account, label) = (&part.account, labels(Some(&part.plugin)));
        let _ = write!(
            out,
            "---\n# plugin {} {}: its identity\napiVersion: v1\nkind: ServiceAccount\n\
             metadata:\n  name: {account}\n  namespace: {namespace}\n{label}",
            part.plugin, part.version
        );
        for guessed in &part.guessed {
            let _ = writeln!(
                out,
                "# ({guessed} is not a built-in kind: its plural and namespaced scope are \
                 assumed)"
            );
        }
        for set in &part.roles {
            role_set(&mut out, set, namespace);
        }
    }
    out
}

/// The `labels:` of an object of `plugin`'s RBAC (nothing for the host's own).
fn labels(plugin: Option<&str>) -> String {
    plugin.map_or_else(String::new, |p| {
        format!("  labels:\n    {PLUGIN_LABEL}: {p}\n")
    })
}

/// A role and its binding to a ServiceAccount of `accounts` (their namespace).
fn role_set(out: &mut String, set: &RoleSet, accounts: &str) {
    let (name, label) = (&set.name, labels(set.plugin.as_deref()));
    let (role, binding, meta) = match &set.namespace {
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
    let _ = write!(
        out,
        "---\n# {}\napiVersion: rbac.authorization.k8s.io/v1\n\
         kind: {role}\nmetadata:\n{meta}rules:\n",
        set.what
    );
    for (target, verbs) in &set.rules {
        let _ = write!(out, "{}", rule(target, verbs, "  "));
    }
    let _ = write!(
        out,
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\nmetadata:\n{meta}\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role}\n  name: {name}\n\
         subjects:\n  - kind: ServiceAccount\n    name: {}\n    namespace: {accounts}\n",
        set.subject
    );
}

/// One rule as a YAML list item, indented by `indent`.
pub(super) fn rule(target: &RuleTarget, verbs: &[&str], indent: &str) -> String {
    let mut out = format!(
        "{indent}- apiGroups: [\"{}\"]\n{indent}  resources: [{}]\n",
        target.group, target.resource
    );
    if !target.names.is_empty() {
        let _ = writeln!(
            out,
            "{indent}  resourceNames: [{}]",
            target.names.join(", ")
        );
    }
    let _ = writeln!(out, "{indent}  verbs: [{}]", verbs.join(", "));
    out
}
