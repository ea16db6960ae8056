//! The transcripts of a recording directory as one tar archive on standard output, so
//! they can be fetched from a host's Pod whose image has no shell and no `tar`
//! (`kubectl exec POD -- wasm-controller-manager transcripts DIR > transcripts.tar`).
//! `kubectl cp` needs `tar` inside the container; the host binary is all the image has.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why the transcripts could not be archived.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The directory (or an entry of it) could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// The archive could not be written.
    #[error("cannot write the archive: {0}")]
    Write(std::io::Error),
}

/// How deep below the directory transcripts are looked for: a recording directory's
/// own files, and one directory per recorded plugin (`DIR/NAME/000001.yaml`).
const MAX_DEPTH: usize = 2;

/// Writes every transcript (`*.yaml`, a regular file; links are not followed) under
/// `dir` to `out` as a tar archive, paths relative to `dir`, in name order; how many.
pub fn write_archive(dir: &Path, out: impl Write) -> Result<usize, ArchiveError> {
    let mut files = Vec::new();
    collect(dir, Path::new(""), MAX_DEPTH, &mut files)?;
    files.sort();
    let mut archive = tar::Builder::new(out);
    archive.follow_symlinks(false);
    for relative in &files {
        let path = dir.join(relative);
        let mut file = std::fs::File::open(&path).map_err(|source| ArchiveError::Read {
            path: path.clone(),
            source,
        })?;
        archive
            .append_file(relative, &mut file)
            .map_err(ArchiveError::Write)?;
    }
    archive.finish().map_err(ArchiveError::Write)?;
    Ok(files.len())
}

/// The transcripts below `dir/relative`, `depth` levels down at most.
fn collect(
    dir: &Path,
    relative: &Path,
    depth: usize,
    found: &mut Vec<PathBuf>,
) -> Result<(), ArchiveError> {
    let here = match relative.as_os_str().is_empty() {
        true => dir.to_path_buf(),
        false => dir.join(relative),
    };
    let read = |source| ArchiveError::Read {
        path: here.clone(),
        source,
    };
    for entry in std::fs::read_dir(&here).map_err(read)? {
        let entry = entry.map_err(read)?;
        let kind = entry.file_type().map_err(read)?;
        let name = relative.join(entry.file_name());
        let transcript = entry.file_name().to_string_lossy().ends_with(".yaml");
        if kind.is_file() && transcript {
            found.push(name);
        } else if kind.is_dir() && depth > 1 {
            collect(dir, &name, depth - 1, found)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_of_each_plugin_are_archived_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plugin = dir.path().join("pod-counter");
        std::fs::create_dir(&plugin).expect("mkdir");
        std::fs::write(plugin.join("000001.yaml"), "plugin: pod-counter\n").expect("write");
        std::fs::write(plugin.join("notes.txt"), "not a transcript").expect("write");
        std::fs::write(dir.path().join("000002.yaml"), "plugin: x\n").expect("write");
        std::os::unix::fs::symlink("/etc/passwd", plugin.join("passwd.yaml")).expect("link");
        let mut bytes = Vec::new();
        assert_eq!(write_archive(dir.path(), &mut bytes).expect("archived"), 2);
        let mut archive = tar::Archive::new(&bytes[..]);
        let entries = archive.entries().expect("a tar archive");
        let names: Vec<String> = entries
            .map(|e| {
                e.expect("an entry")
                    .path()
                    .expect("a path")
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(names, ["000002.yaml", "pod-counter/000001.yaml"]);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let err =
            write_archive(Path::new("/no/such/dir"), Vec::new()).expect_err("no such directory");
        assert!(
            err.to_string().starts_with("cannot read /no/such/dir:"),
            "{err}"
        );
    }
}
