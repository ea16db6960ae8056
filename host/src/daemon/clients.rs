//! The daemon's clients: the host's own, counted as client-go counts its requests,
//! and one per plugin acting as its ServiceAccount.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::metrics::rest::CountRequests;
use crate::rights::identity::{ClientFactory, PluginIdentities, ServiceAccounts};

/// A client whose requests are counted in `rest_client_requests_total`, as client-go's.
pub fn counted_client(
    config: kube::Config,
    metrics: &Metrics,
) -> Result<kube::Client, kube::Error> {
    let host = (config.cluster_url.authority())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let layer = CountRequests::new(metrics.standard.rest_requests.clone(), &host);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// A client per plugin acting as its ServiceAccount of `accounts`, or without, the
/// host's client for every plugin.
pub(super) fn plugin_identities(
    accounts: Option<ServiceAccounts>,
    config: kube::Config,
    client: kube::Client,
    metrics: &Arc<Metrics>,
) -> PluginIdentities {
    let Some(accounts) = accounts else {
        tracing::warn!(
            "--impersonate-plugins=false: plugins act with the host's identity and share \
            its rights; RBAC cannot tell them apart or limit them"
        );
        return PluginIdentities::shared(client);
    };
    tracing::info!(user = %accounts.user("<plugin>"), "plugins act as their own ServiceAccounts");
    let metrics = metrics.clone();
    let build: ClientFactory =
        Arc::new(move |config| counted_client(config, &metrics).map_err(|e| e.to_string()));
    PluginIdentities::impersonating(client, config, accounts, build)
}
