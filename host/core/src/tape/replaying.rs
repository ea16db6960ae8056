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

/// Largest transcript file read: a recorder keeps at most 1 MiB of calls as JSON, a
/// few times that as YAML with the rest of the transcript; a file larger than this was
/// not written by the host, and is refused unread.
pub const MAX_TRANSCRIPT_FILE_BYTES: u64 = 8 << 20;

/// The transcript files of `dir` (`*.yaml`), in name order; each is read when its
/// turn comes ([`read_transcript`]), so a directory of many costs one at a time.
pub fn transcript_files(dir: &Path) -> Result<Vec<PathBuf>, RecorderError> {
    let failed = |cause| RecorderError::Dir {
        path: dir.to_path_buf(),
        cause,
    };
    let mut files: Vec<PathBuf> = (std::fs::read_dir(dir).map_err(failed)?)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The transcript in `path`: a regular file of at most [`MAX_TRANSCRIPT_FILE_BYTES`]
/// (a FIFO or a link to a device is refused, not read), parsed within the YAML
/// parser's budget (nesting, aliases, documents).
pub fn read_transcript(path: &Path) -> Result<Transcript, RecorderError> {
    let invalid = |cause: String| RecorderError::Transcript {
        path: path.to_path_buf(),
        cause,
    };
    let limit = crate::plugin::file::SizeLimit {
        max: MAX_TRANSCRIPT_FILE_BYTES,
        hint: "",
    };
    let bytes = crate::plugin::file::read(path, limit).map_err(|e| invalid(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| invalid(format!("not UTF-8: {e}")))?;
    serde_saphyr::from_str(&text)
        .map_err(|e| invalid(crate::logs::escape_cut(&e.to_string(), 300).0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_too_large_or_not_a_file_is_refused_unread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("000001.yaml");
        let file = std::fs::File::create(&big).expect("file");
        file.set_len(MAX_TRANSCRIPT_FILE_BYTES + 1).expect("sparse");
        let refused = read_transcript(&big).expect_err("too large").to_string();
        assert!(
            refused.contains("more than the limit of 8388608"),
            "{refused}"
        );
        let deep = dir.path().join("000002.yaml");
        std::fs::write(&deep, "[".repeat(100_000)).expect("write");
        assert!(
            read_transcript(&deep).is_err(),
            "too deep for the parser's budget"
        );
        assert_eq!(transcript_files(dir.path()).expect("files").len(), 2);
    }
}
