//! The identity a plugin's API calls are made with: the host's own, or the plugin's
//! ServiceAccount through impersonation, so that the API server's RBAC decides what
//! the plugin may do, the audit log names it, and API Priority and Fairness sees it as
//! a flow of its own (as kube-controller-manager's `--use-service-account-credentials`
//! gives each of its controllers a ServiceAccount).

use std::sync::Arc;

use kube::Client;

use crate::kube::names::{is_dns_label, is_dns_subdomain};

/// Builds a client from a configuration (the host adds its request metrics layer).
pub type ClientFactory = Arc<dyn Fn(kube::Config) -> Result<Client, String> + Send + Sync>;

/// The label on every object of one plugin's RBAC (`wasm-controller-manager rbac`),
/// valued with the plugin's name: what grants and removes one plugin's RBAC alone, and
/// how the host tells that a changed binding concerns that plugin.
pub const PLUGIN_LABEL: &str = "wasm-controller-manager.io/plugin";

/// Where plugins' ServiceAccounts live and what they are called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccounts {
    /// Namespace of every plugin's ServiceAccount.
    pub namespace: String,
    /// Prefix before the plugin's name (`wcm-plugin-`).
    pub prefix: String,
}

/// `name` as a ServiceAccount's name (the host's own), refused when not valid.
pub fn valid_account(name: &str) -> Result<&str, String> {
    match is_dns_subdomain(name) {
        true => Ok(name),
        false => Err(format!("{name:?} is not a valid ServiceAccount name")),
    }
}

impl ServiceAccounts {
    /// Checks that `namespace` is a namespace and `prefix` starts valid object names.
    pub fn new(namespace: &str, prefix: &str) -> Result<ServiceAccounts, String> {
        if !is_dns_label(namespace) {
            return Err(format!("{namespace:?} is not a valid namespace"));
        }
        if !is_dns_subdomain(&format!("{prefix}plugin")) {
            return Err(format!(
                "prefix {prefix:?} does not make valid ServiceAccount names"
            ));
        }
        Ok(ServiceAccounts {
            namespace: namespace.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The ServiceAccount (and role) name of `plugin`: `<prefix><plugin>`.
    pub fn name(&self, plugin: &str) -> String {
        format!("{}{plugin}", self.prefix)
    }

    /// `plugin`'s account name, refused when it is not a valid one (a long plugin
    /// name after a long prefix).
    pub fn valid_name(&self, plugin: &str) -> Result<String, String> {
        let account = self.name(plugin);
        match is_dns_subdomain(&account) {
            true => Ok(account),
            false => Err(format!(
                "{account:?} (--service-account-prefix and plugin name) is not a valid name"
            )),
        }
    }

    /// The user name `plugin` acts as: `system:serviceaccount:<namespace>:<prefix><plugin>`.
    pub fn user(&self, plugin: &str) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace,
            self.name(plugin)
        )
    }
}

/// A plugin's client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the API client of plugin {plugin} (acting as {user}): {reason}")]
pub struct IdentityError {
    /// The plugin.
    pub plugin: String,
    /// The user it would act as.
    pub user: String,
    /// Why.
    pub reason: String,
}

/// The host's client, and how to make each plugin's.
#[derive(Clone)]
pub struct PluginIdentities {
    host: Client,
    impersonation: Option<(kube::Config, ServiceAccounts, ClientFactory)>,
}

impl PluginIdentities {
    /// Every plugin acts as the host (impersonation off): plugins share its rights.
    pub fn shared(host: Client) -> PluginIdentities {
        PluginIdentities {
            host,
            impersonation: None,
        }
    }

    /// Each plugin acts as its ServiceAccount in `accounts`; `config` is the host's
    /// own configuration, which must be allowed to impersonate those accounts.
    pub fn impersonating(
        host: Client,
        config: kube::Config,
        accounts: ServiceAccounts,
        build: ClientFactory,
    ) -> PluginIdentities {
        PluginIdentities {
            host,
            impersonation: Some((config, accounts, build)),
        }
    }

    /// Where plugins' ServiceAccounts are, when plugins act as their own.
    pub fn accounts(&self) -> Option<&ServiceAccounts> {
        self.impersonation.as_ref().map(|(_, accounts, _)| accounts)
    }

    /// The host's own client (informers, discovery, the plugins' shared reads).
    pub fn host(&self) -> &Client {
        &self.host
    }

    /// The client for `plugin`'s writes and Events.
    pub fn client_for(&self, plugin: &str) -> Result<Client, IdentityError> {
        let Some((config, accounts, build)) = &self.impersonation else {
            return Ok(self.host.clone());
        };
        let user = accounts.user(plugin);
        let mut config = config.clone();
        config.auth_info.impersonate = Some(user.clone());
        // The API server adds a ServiceAccount's groups itself when none are given.
        config.auth_info.impersonate_groups = None;
        build(config).map_err(|reason| IdentityError {
            plugin: plugin.to_string(),
            user,
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_acts_as_its_service_account() {
        let accounts = ServiceAccounts::new("wcm-system", "wcm-plugin-").expect("valid");
        assert_eq!(
            accounts.user("pod-counter"),
            "system:serviceaccount:wcm-system:wcm-plugin-pod-counter"
        );
        assert!(ServiceAccounts::new("Not_A_Namespace", "p-").is_err());
        assert!(ServiceAccounts::new("wcm-system", "Bad/").is_err());
    }
}
