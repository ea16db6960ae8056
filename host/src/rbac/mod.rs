//! Least-privilege RBAC for plugins, derived from their registrations: what
//! `wasm-controller-manager rbac` prints for an operator to review and apply.

mod kinds;
mod load;
mod render;
mod rights;

pub use kinds::{RbacKind, rbac_kind};
pub use load::{RegistrationError, load_registered, load_registered_with, registrations};
pub use render::{Naming, render};
pub use rights::{PluginRights, Rights, Target, plugin_rights, plugin_rights_with};

/// The host's own rights when it runs `plugins`: list and watch what they watch (the
/// informers are shared), impersonate their ServiceAccounts, create
/// SubjectAccessReviews, list and watch RBAC itself (a change of a role or binding
/// has the plugins it concerns reviewed at once), and hold its Lease in its namespace.
pub fn host_rights(plugins: &[PluginRights], naming: &Naming) -> Rights {
    let mut rights = Rights::new();
    for plugin in plugins {
        for target in plugin.watches.keys() {
            let entry = rights.entry(target.clone()).or_default();
            entry.extend(["list", "watch"]);
        }
    }
    rights::drop_subsumed(&mut rights);
    let mut accounts: Vec<String> = plugins
        .iter()
        .map(|p| naming.accounts.name(&p.plugin))
        .collect();
    accounts.sort();
    accounts.dedup();
    let home = Some(naming.accounts.namespace.clone());
    if !accounts.is_empty() {
        let target = Target {
            names: accounts,
            ..Target::new(home.clone(), "", "serviceaccounts")
        };
        rights.insert(target, ["impersonate"].into());
        for resource in [
            "clusterrolebindings",
            "clusterroles",
            "rolebindings",
            "roles",
        ] {
            let rbac = Target::new(None, "rbac.authorization.k8s.io", resource);
            rights.insert(rbac, ["list", "watch"].into());
        }
    }
    let reviews = Target::new(None, "authorization.k8s.io", "subjectaccessreviews");
    rights.insert(reviews, ["create"].into());
    let leases = Target::new(home, "coordination.k8s.io", "leases");
    // list and watch: a standby watches its Lease to take it as soon as it is released.
    rights.insert(leases, ["create", "get", "list", "update", "watch"].into());
    rights
}

#[cfg(test)]
mod tests;
