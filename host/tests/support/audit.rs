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
    /// When it answered (the write was applied by then).
    pub completed: Timestamp,
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
    let writes = writes_mentioning(path, agent)?;
    Ok(writes
        .into_iter()
        .filter(|w| w.user_agent.contains(agent))
        .collect())
}

/// Every write in the audit log at `path` whose entry mentions `text` anywhere (an
/// object's name, a User-Agent), access reviews left out; only those entries are
/// parsed, so a search of a large log for one object is quick.
pub fn writes_mentioning(path: &Path, text: &str) -> Result<Vec<Write>> {
    let log = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading the audit log {} (a control plane started before auditing was added \
             has none: `make cluster-down cluster-up`)",
            path.display()
        )
    })?;
    let lines = log.lines().filter(|l| l.contains(text));
    let writes = lines.map(parse).collect::<Result<Vec<_>>>()?;
    Ok(writes.into_iter().flatten().collect())
}

/// One entry of the log, unless it is of an access review.
fn parse(line: &str) -> Result<Option<Write>> {
    let entry: Value = serde_json::from_str(line).context("audit line")?;
    let object = &entry["objectRef"];
    if object["resource"]
        .as_str()
        .is_some_and(|r| r.ends_with("accessreviews"))
    {
        return Ok(None);
    }
    let text = |v: &Value| v.as_str().map(str::to_string);
    let time = |field: &str| -> Result<Timestamp> {
        let stamp = entry[field]
            .as_str()
            .with_context(|| format!("no {field}"))?;
        Ok(stamp.parse()?)
    };
    Ok(Some(Write {
        user_agent: text(&entry["userAgent"]).unwrap_or_default(),
        verb: text(&entry["verb"]).unwrap_or_default(),
        resource: text(&object["resource"]).unwrap_or_default(),
        namespace: text(&object["namespace"]),
        name: text(&object["name"]),
        received: time("requestReceivedTimestamp")?,
        completed: time("stageTimestamp")?,
        code: entry["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
        uri: text(&entry["requestURI"]).unwrap_or_default(),
        user: text(&entry["user"]["username"]).unwrap_or_default(),
        impersonated: text(&entry["impersonatedUser"]["username"]),
    }))
}
