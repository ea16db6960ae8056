//! A controller's writes over a burst, read from the API server's audit log: how many,
//! how long the API server took over each, and how long the controller took between
//! one write's answer and its next request. The two times split a controller's
//! latency between the API server's side and its own (both controllers under test
//! write one request at a time).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};

use super::median;

/// Where the audit log stood when a burst began. The API server rotates it (at
/// `--audit-log-maxsize`), possibly during the burst.
pub struct AuditMark {
    len: u64,
    at: SystemTime,
}

impl AuditMark {
    /// The end of `audit` now.
    pub fn now(audit: &Path) -> Result<AuditMark> {
        let at = SystemTime::now();
        let len = std::fs::metadata(audit)?.len();
        Ok(AuditMark { len, at })
    }
}

/// One write: when the API server received it and when it answered.
#[derive(Clone, Copy)]
struct Write {
    received: SystemTime,
    answered: SystemTime,
}

/// The controller's writes over a burst.
pub struct Writes(Vec<Write>);

impl Writes {
    /// The controller's writes in the audit log since `mark`: in the file it was in
    /// (which a rotation since then renamed `audit-<time>.log`) and, after a rotation,
    /// all of the new one.
    pub fn since(audit: &Path, mark: &AuditMark) -> Result<Writes> {
        let mut writes = match rotated_since(audit, mark)? {
            Some(old) => [writes_in(&old, mark.len)?, writes_in(audit, 0)?].concat(),
            None => writes_in(audit, mark.len)?,
        };
        writes.sort_by_key(|w| w.received);
        Ok(Writes(writes))
    }

    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// Median milliseconds the API server took over one write.
    pub fn api_ms(&self) -> f64 {
        let took = self.0.iter().map(|w| millis(w.received, w.answered));
        median_or_zero(took.collect())
    }

    /// Median milliseconds from one write's answer to the controller's next request:
    /// its own work between writes (reconcile logic, queue, client), with gaps over
    /// a second (idle between bursts of work) left out.
    pub fn own_ms(&self) -> f64 {
        let gaps = self
            .0
            .windows(2)
            .map(|w| millis(w[0].answered, w[1].received));
        median_or_zero(gaps.filter(|g| (0.0..1000.0).contains(g)).collect())
    }
}

fn millis(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(d) => d.as_secs_f64() * 1000.0,
        Err(e) => -e.duration().as_secs_f64() * 1000.0,
    }
}

fn median_or_zero(values: Vec<f64>) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        median(values)
    }
}

/// The file the API server rotated `audit` into since `mark`, if it did.
fn rotated_since(audit: &Path, mark: &AuditMark) -> Result<Option<PathBuf>> {
    let dir = audit.parent().context("audit dir")?;
    let mut rotated = None;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("audit-") && entry.metadata()?.modified()? >= mark.at {
            rotated = Some(entry.path());
        }
    }
    Ok(rotated)
}

/// The controller's writes in one audit file after byte `from`: every write but the
/// control plane's own (the scheduler's status patches and Events, the controller
/// manager's) and the bench's (Pod creates, namespaces). The audit policy logs every
/// write with its user agent and timestamps.
fn writes_in(audit: &Path, from: u64) -> Result<Vec<Write>> {
    // Only the burst's part is read: the log before it grows by every earlier burst.
    let mut file = std::fs::File::open(audit)?;
    file.seek(SeekFrom::Start(from))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    let mut writes = Vec::new();
    for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let entry: serde_json::Value = serde_json::from_slice(line)?;
        if !by_controller(&entry) {
            continue;
        }
        let time = |field: &str| -> Result<SystemTime> {
            let text = entry[field]
                .as_str()
                .with_context(|| format!("audit {field}"))?;
            Ok(humantime::parse_rfc3339(text)?)
        };
        writes.push(Write {
            received: time("requestReceivedTimestamp")?,
            answered: time("stageTimestamp")?,
        });
    }
    Ok(writes)
}

/// Whether an audit entry is a write of the controller under test.
fn by_controller(entry: &serde_json::Value) -> bool {
    let agent = entry["userAgent"].as_str().unwrap_or_default();
    let resource = entry["objectRef"]["resource"].as_str().unwrap_or_default();
    let control_plane = [
        "kube-scheduler",
        "kube-controller-manager",
        "kube-apiserver",
    ]
    .iter()
    .any(|c| agent.starts_with(c));
    let bench = resource == "namespaces" || (resource == "pods" && entry["verb"] == "create");
    !control_plane && !bench
}
