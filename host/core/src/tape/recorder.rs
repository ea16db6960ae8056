//! The daemon's side of transcripts: a plugin the operator names
//! (`--record-plugin NAME=DIR`) has each reconcile's calls written to a file of its
//! own in DIR (`000001.yaml`, ...), within a bound on the directory's size.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{CallTape, TapedKey, Transcript};
use crate::keys::ReconcileKey;

/// Why a recording cannot start, or a transcript directory not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// The directory cannot be made or read.
    #[error("{}: {cause}", path.display())]
    Dir {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A file in it is not a transcript.
    #[error("{}: not a transcript: {cause}", path.display())]
    Transcript { path: PathBuf, cause: String },
}

/// Writes one plugin's transcripts.
#[derive(Debug)]
pub struct Recorder {
    plugin: String,
    dir: PathBuf,
    /// Whether Secrets' data is kept (else redacted).
    secrets: bool,
    max_bytes: u64,
    written: AtomicU64,
    next: AtomicU64,
    stopped: AtomicBool,
}

impl Recorder {
    /// Records `plugin` into `dir` (made if missing; numbering goes on after the
    /// transcripts already there), at most `max_bytes` of transcripts in all, those
    /// already there counted: restarts do not add up past the bound. What an
    /// interrupted write left (`.NNNNNN.yaml.tmp`) is removed.
    pub fn new(
        plugin: &str,
        dir: &Path,
        secrets: bool,
        max_bytes: u64,
    ) -> Result<Recorder, RecorderError> {
        let failed = |cause| RecorderError::Dir {
            path: dir.to_path_buf(),
            cause,
        };
        std::fs::create_dir_all(dir).map_err(failed)?;
        let leftover = |name: &str| name.starts_with('.') && name.ends_with(".yaml.tmp");
        crate::disk_bound::remove_leftovers(dir, leftover, "transcripts");
        let (mut last, mut written) = (0, 0);
        for entry in std::fs::read_dir(dir).map_err(failed)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(number) = name
                .strip_suffix(".yaml")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            last = last.max(number);
            written += entry.metadata().map_or(0, |m| m.len());
        }
        Ok(Recorder {
            plugin: plugin.to_string(),
            dir: dir.to_path_buf(),
            secrets,
            max_bytes,
            written: AtomicU64::new(written),
            next: AtomicU64::new(last + 1),
            stopped: AtomicBool::new(false),
        })
    }

    /// A tape for the next reconcile.
    pub fn tape(&self) -> CallTape {
        CallTape::recording(self.secrets)
    }

    /// Writes the transcript of a reconcile of `key` that began at `began` and
    /// returned `result`, with the calls on `tape`. A failure to write is logged; the
    /// plugin runs on either way.
    pub async fn write(
        &self,
        key: &ReconcileKey,
        began: SystemTime,
        result: String,
        tape: CallTape,
    ) {
        let CallTape::Recording {
            calls,
            truncated,
            redact,
            ..
        } = tape
        else {
            return;
        };
        let transcript = Transcript {
            plugin: self.plugin.clone(),
            key: TapedKey::of(key),
            clock: rfc3339(began),
            result,
            redacted: redact,
            truncated,
            calls,
        };
        let text = match serde_saphyr::to_string(&transcript) {
            Ok(text) => text,
            Err(e) => {
                return tracing::warn!(plugin = %self.plugin, error = %e, "cannot render a transcript");
            }
        };
        let size = text.len() as u64;
        if self.written.fetch_add(size, Ordering::Relaxed) + size > self.max_bytes {
            if !self.stopped.swap(true, Ordering::Relaxed) {
                tracing::warn!(plugin = %self.plugin, dir = %self.dir.display(), max_bytes = self.max_bytes,
                    "recording stopped: its transcripts reached --record-max-mib");
            }
            return;
        }
        self.store(&text).await;
    }
}

impl Recorder {
    /// Writes `text` as the next transcript, whole or not at all (a file of its own
    /// renamed into place).
    async fn store(&self, text: &str) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{number:06}.yaml"));
        let partial = self.dir.join(format!(".{number:06}.yaml.tmp"));
        let written = async {
            tokio::fs::write(&partial, text).await?;
            tokio::fs::rename(&partial, &path).await
        };
        if let Err(e) = written.await {
            tracing::warn!(plugin = %self.plugin, path = %path.display(), error = %e,
                "cannot write a transcript");
        }
    }
}

/// `time` as RFC 3339, to whole seconds, as Kubernetes writes times.
fn rfc3339(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let stamp = k8s_openapi::jiff::Timestamp::from_second(i64::try_from(seconds).unwrap_or(0));
    stamp.map_or_else(|_| "1970-01-01T00:00:00Z".into(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_already_on_disk_count_against_the_bound_and_leftovers_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("000007.yaml"), [b'x'; 600]).expect("write");
        let left = dir.path().join(".000008.yaml.tmp");
        std::fs::write(&left, [b'x'; 600]).expect("write");
        crate::disk_bound::age_past_leftover(&left);
        let recorder = Recorder::new("p", dir.path(), false, 1000).expect("a recorder");
        assert!(!left.exists(), "an interrupted write is removed");
        assert_eq!(recorder.written.load(Ordering::Relaxed), 600);
        assert_eq!(recorder.next.load(Ordering::Relaxed), 8);
    }
}
