//! A plugin's rights, in one place: whom it acts as (`identity`: its ServiceAccount,
//! by impersonation), what its registration needs (`needed`, by RBAC kind in
//! `kinds`) and how that is rendered as least-privilege RBAC for an operator to
//! review and apply (`render`, what `wasm-controller-manager rbac` prints, and
//! `chart_values`, the same as values of the Helm chart), what RBAC
//! grants it, asked with SubjectAccessReviews (`access`), what the host enforces
//! from the last review (`granted`), and the changes of RBAC that call for a review
//! at once (`changes`). The review loop of a running plugin is the controller's; the
//! retries of a plugin waiting for a right are the manager's.

pub mod access;
pub mod changes;
mod chart_values;
mod granted;
pub mod identity;
mod kinds;
mod needed;
mod render;

pub use chart_values::chart_values;
pub use granted::{Granted, Review};
pub use identity::PLUGIN_LABEL;
pub use kinds::{RbacKind, rbac_kind};
pub use needed::{PluginRights, Rights, RuleTarget, plugin_rights, plugin_rights_with};
pub use render::{Document, Naming, PodSecurity, document, render};

/// The host's own rights, the same whatever plugins it runs: create
/// SubjectAccessReviews (of its plugins' rights), list and watch RBAC itself (a change
/// of a role or binding has the plugins it concerns reviewed at once), hold its
/// Lease in its namespace, and record Events about plugins' states and about objects
/// its informers cannot decode.
pub fn host_rights(naming: &Naming) -> Rights {
    let mut rights = Rights::new();
    let reviews = RuleTarget::new(None, "authorization.k8s.io", "subjectaccessreviews");
    rights.insert(reviews, ["create"].into());
    for resource in [
        "clusterrolebindings",
        "clusterroles",
        "rolebindings",
        "roles",
    ] {
        let rbac = RuleTarget::new(None, "rbac.authorization.k8s.io", resource);
        rights.insert(rbac, ["list", "watch"].into());
    }
    let home = Some(naming.accounts.namespace.clone());
    let leases = RuleTarget::new(home.clone(), "coordination.k8s.io", "leases");
    // list and watch: a standby watches its Lease to take it as soon as it is released;
    // delete: a replica leaving the group (per-plugin mode) deletes its membership Lease.
    rights.insert(
        leases,
        ["create", "delete", "get", "list", "update", "watch"].into(),
    );
    // The WasmPlugins of its namespace, their status, and their pull Secrets (read at
    // each pull; their changes watched, metadata only, so a mended Secret retries a
    // failed pull at once).
    let group = "wasm-controller-manager.io";
    let plugins = RuleTarget::new(home.clone(), group, "wasmplugins");
    rights.insert(plugins, ["get", "list", "watch"].into());
    let status = RuleTarget::new(home.clone(), group, "wasmplugins/status");
    rights.insert(status, ["patch", "update"].into());
    let secrets = RuleTarget::new(home, "", "secrets");
    rights.insert(secrets, ["get", "list", "watch"].into());
    // Events of its own: about plugins' states (on its Pod or their WasmPlugins), and
    // on any object an informer cannot decode, wherever it is; repeats patched into
    // their series.
    let events = RuleTarget::new(None, "events.k8s.io", "events");
    rights.insert(events, ["create", "patch"].into());
    rights
}

/// The host's rights for running `plugin`: list and watch what it watches (the
/// informers are shared) and impersonate its ServiceAccount. Part of the plugin's
/// RBAC, so granting or removing one plugin never changes another's.
pub fn host_rights_for(plugin: &PluginRights, naming: &Naming) -> Rights {
    let mut rights = Rights::new();
    for target in plugin.watches.keys() {
        let entry = rights.entry(target.clone()).or_default();
        entry.extend(["list", "watch"]);
    }
    needed::drop_subsumed(&mut rights);
    let account = RuleTarget {
        names: vec![naming.accounts.name(&plugin.plugin)],
        ..RuleTarget::new(
            Some(naming.accounts.namespace.clone()),
            "",
            "serviceaccounts",
        )
    };
    rights.insert(account, ["impersonate"].into());
    rights
}

#[cfg(test)]
mod tests;
