//! The test kit's side of transcripts: a directory's transcripts read in order,
//! each with the moment its reconcile began.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{RecorderError, Transcript};

impl Transcript {
    /// The plugin's wall clock when the reconcile began, since the Unix epoch.
    pub fn clock_since_epoch(&self) -> Duration {
        let stamp = self.clock.parse::<k8s_openapi::jiff::Timestamp>().ok();
        let seconds = stamp.map_or(0, |t| t.as_second());
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }
}

/// The transcripts of `dir` (`*.yaml`), in name order.
pub fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, Transcript)>, RecorderError> {
    let failed = |cause| RecorderError::Dir {
        path: dir.to_path_buf(),
        cause,
    };
    let mut files: Vec<PathBuf> = (std::fs::read_dir(dir).map_err(failed)?)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut transcripts = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|cause| RecorderError::Dir {
            path: path.clone(),
            cause,
        })?;
        let transcript: Transcript =
            serde_saphyr::from_str(&text).map_err(|e| RecorderError::Transcript {
                path: path.clone(),
                cause: e.to_string(),
            })?;
        transcripts.push((path, transcript));
    }
    Ok(transcripts)
}
