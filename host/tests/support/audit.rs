//! Reads the local API server's audit log: which client wrote what, and when the API
//! server received it.

use std::path::Path;

use anyhow::{Context, Result};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One write as the API server recorded it.
#[derive(Debug, Clone)]
pub struct Write {
    /// The client's User-Agent (the host puts its identity there).
    pub user_agent: String,
    /// `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// Resource (plural), e.g. `pods`, `nodes`, `events`, `leases`.
    pub resource: String,
    /// Namespace, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// When the API server received the request.
    pub received: Timestamp,
    /// The response code.
    pub code: u16,
    /// The request's path and query, as received.
    pub uri: String,
    /// The authenticated user.
    pub user: String,
    /// The user the request acted as, when its client impersonated one.
    pub impersonated: Option<String>,
}

/// Every write in the audit log at `path` made by a client whose User-Agent contains
/// `agent`. Access reviews are left out: a `create` of a SubjectAccessReview asks
/// the authorizer a question and stores nothing (the host asks them on every replica,
/// standbys included).
pub fn writes_by(path: &Path, agent: &str) -> Result<Vec<Write>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading the audit log {} (a control plane started before auditing was added \
             has none: `make cluster-down cluster-up`)",
            path.display()
        )
    })?;
    let mut writes = Vec::new();
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).context("audit line")?;
        let user_agent = entry["userAgent"].as_str().unwrap_or_default();
        if !user_agent.contains(agent) {
            continue;
        }
        let object = &entry["objectRef"];
        if object["resource"]
            .as_str()
            .is_some_and(|r| r.ends_with("accessreviews"))
        {
            continue;
        }
        let text = |v: &Value| v.as_str().map(str::to_string);
        writes.push(Write {
            user_agent: user_agent.to_string(),
            verb: text(&entry["verb"]).unwrap_or_default(),
            resource: text(&object["resource"]).unwrap_or_default(),
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            received: entry["requestReceivedTimestamp"]
                .as_str()
                .context("no requestReceivedTimestamp")?
                .parse()?,
            code: entry["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
            uri: text(&entry["requestURI"]).unwrap_or_default(),
            user: text(&entry["user"]["username"]).unwrap_or_default(),
            impersonated: text(&entry["impersonatedUser"]["username"]),
        });
    }
    Ok(writes)
}
