//! A plugin's name, whoever chose it (a file in the plugins directory, a `WasmPlugin`
//! resource): the rules that make it usable as every identity the host derives from
//! it — its ServiceAccount `wcm-plugin-<name>`, its Lease `<group>-<name>`, the
//! `wasm-controller-manager.io/plugin=<name>` label of its RBAC and Lease, its field
//! manager and its metrics' labels.
//!
//! A DNS-1123 label (at most 63 lower-case letters, digits and `-`) fits every one of
//! them; and `member-` with 12 hex digits is kept for the replicas' membership Leases
//! (`<group>-member-<hash of the identity>`), which a plugin's Lease would otherwise
//! be named like.

use crate::kube::names::{LABEL_MAX, is_dns_label};

/// Why a name cannot be a plugin's; the text says the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not a DNS-1123 label.
    #[error(
        "a plugin's name must be a DNS-1123 label (lower-case letters, digits and '-', at \
         most {LABEL_MAX} characters): it names the plugin's ServiceAccount, Lease and labels"
    )]
    NotALabel,
    /// The form of a membership Lease's suffix.
    #[error(
        "names of the form member-<12 hex digits> are kept for the replicas' membership \
         Leases, which the plugin's Lease would be named like"
    )]
    Reserved,
}

/// Whether `name` may name a plugin.
pub fn check(name: &str) -> Result<(), NameError> {
    if !is_dns_label(name) {
        return Err(NameError::NotALabel);
    }
    let reserved = name
        .strip_prefix("member-")
        .is_some_and(|rest| rest.len() == 12 && rest.bytes().all(|b| b.is_ascii_hexdigit()));
    match reserved {
        true => Err(NameError::Reserved),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_is_named_by_a_dns_label_that_no_membership_lease_has() {
        assert_eq!(check("pod-counter"), Ok(()));
        assert_eq!(check("member-sync"), Ok(()));
        assert_eq!(
            check("member-0123456789ab0"),
            Ok(()),
            "13 digits is no membership's"
        );
        assert_eq!(check("member-0123456789ab"), Err(NameError::Reserved));
        assert_eq!(check("a.b"), Err(NameError::NotALabel));
        assert_eq!(check(&"a".repeat(64)), Err(NameError::NotALabel));
        assert_eq!(check("Pod"), Err(NameError::NotALabel));
        assert_eq!(check(""), Err(NameError::NotALabel));
    }
}
