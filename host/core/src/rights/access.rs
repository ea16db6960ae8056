//! What a plugin's ServiceAccount may do, asked of the API server with
//! SubjectAccessReviews: the host serves a plugin from its shared caches only what
//! the plugin's own identity may list and watch, and shows what it declared against
//! what RBAC grants.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::identity::ServiceAccounts;
use crate::metrics::{Metrics, ReviewResult};

/// One permission: a verb on a resource (or `resource/subresource`), in a namespace
/// or at the cluster scope. Displayed as the API server words its refusals, so an
/// operator can grep for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// `list`, `watch`, `patch`, ...
    pub verb: String,
    /// API group (`""` for the core group).
    pub group: String,
    /// Plural resource, with `/subresource` if any.
    pub resource: String,
    /// `None`: cluster-wide.
    pub namespace: Option<String>,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, resource, group) = (&self.verb, &self.resource, &self.group);
        write!(
            f,
            "{verb} resource \"{resource}\" in API group \"{group}\" "
        )?;
        match &self.namespace {
            Some(ns) => write!(f, "in the namespace \"{ns}\""),
            None => write!(f, "at the cluster scope"),
        }
    }
}

/// A review could not be made (the host may not create SubjectAccessReviews, or
/// the API server is unreachable): the plugin's rights are unknown.
#[derive(Debug, thiserror::Error)]
#[error("cannot review the rights of plugin {plugin} ({user}) to {rule}: {source}")]
pub struct ReviewError {
    /// The plugin.
    pub plugin: String,
    /// The user it acts as.
    pub user: String,
    /// The rule being reviewed.
    pub rule: String,
    /// The API's error.
    #[source]
    pub source: kube::Error,
}

/// Asks the API server, with the host's identity, what plugins' ServiceAccounts may do.
#[derive(Clone)]
pub struct AccessReviewer {
    client: Client,
    accounts: ServiceAccounts,
    metrics: Arc<Metrics>,
}

impl AccessReviewer {
    /// Reviews with `client` (which needs `create` on subjectaccessreviews) for the
    /// accounts of `accounts`, counting each review in `metrics`.
    pub fn new(client: Client, accounts: ServiceAccounts, metrics: Arc<Metrics>) -> Self {
        AccessReviewer {
            client,
            accounts,
            metrics,
        }
    }

    /// The user `plugin` acts as.
    pub fn user(&self, plugin: &str) -> String {
        self.accounts.user(plugin)
    }

    /// The rules of `rules` that `plugin`'s ServiceAccount may not use, in order.
    pub async fn denied(&self, plugin: &str, rules: &[Rule]) -> Result<Vec<Rule>, ReviewError> {
        let reviews = rules.iter().map(|rule| self.allows(plugin, rule));
        let allowed = futures::future::try_join_all(reviews).await?;
        let denied = rules.iter().zip(allowed).filter(|(_, allowed)| !allowed);
        Ok(denied.map(|(rule, _)| rule.clone()).collect())
    }

    /// Whether `plugin`'s ServiceAccount may use `rule`. The groups are those the API
    /// server gives a ServiceAccount's token, so bindings to them count as they
    /// would for the plugin's own requests.
    pub async fn allows(&self, plugin: &str, rule: &Rule) -> Result<bool, ReviewError> {
        let user = self.accounts.user(plugin);
        let (resource, subresource) = match rule.resource.split_once('/') {
            Some((resource, sub)) => (resource.to_string(), Some(sub.to_string())),
            None => (rule.resource.clone(), None),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{}", self.accounts.namespace),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(rule.verb.clone()),
                    group: Some(rule.group.clone()),
                    resource: Some(resource),
                    subresource,
                    namespace: rule.namespace.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await;
        let allowed = answer.as_ref().ok().and_then(|r| r.status.as_ref());
        let result = match (&answer, allowed) {
            (Err(_), _) => ReviewResult::error,
            (Ok(_), Some(status)) if status.allowed => ReviewResult::allowed,
            _ => ReviewResult::denied,
        };
        self.metrics.count_access_review(plugin, result);
        match answer {
            Ok(review) => Ok(review.status.is_some_and(|s| s.allowed)),
            Err(source) => Err(ReviewError {
                plugin: plugin.to_string(),
                user,
                rule: rule.to_string(),
                source,
            }),
        }
    }
}

impl AccessReviewer {
    /// Whether the host itself may impersonate `plugin`'s ServiceAccount (a
    /// SelfSubjectAccessReview, which any authenticated user may make): without it
    /// every write and Event of the plugin fails, whatever the plugin's own rights.
    pub async fn host_may_impersonate(&self, plugin: &str) -> Result<bool, ReviewError> {
        let namespace = self.accounts.namespace.clone();
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("impersonate".into()),
                    group: Some(String::new()),
                    resource: Some("serviceaccounts".into()),
                    name: Some(self.accounts.name(plugin)),
                    namespace: Some(namespace.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await;
        answer
            .map(|r| r.status.is_some_and(|s| s.allowed))
            .map_err(|source| ReviewError {
                plugin: plugin.to_string(),
                user: "the host".into(),
                rule: format!(
                    "impersonate resource \"serviceaccounts\" named \"{}\" in the namespace \"{namespace}\"",
                    self.accounts.name(plugin)
                ),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_reads_as_the_api_servers_refusal_does() {
        let rule = Rule {
            verb: "list".into(),
            group: String::new(),
            resource: "secrets".into(),
            namespace: None,
        };
        assert_eq!(
            rule.to_string(),
            "list resource \"secrets\" in API group \"\" at the cluster scope"
        );
        let rule = Rule {
            namespace: Some("a".into()),
            verb: "patch".into(),
            resource: "webapps/status".into(),
            group: "demo.example.com".into(),
        };
        assert_eq!(
            rule.to_string(),
            "patch resource \"webapps/status\" in API group \"demo.example.com\" in the namespace \"a\""
        );
    }
}
