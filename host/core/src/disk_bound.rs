//! Keeps a directory of cache files within a size: past it, the least recently used
//! files (by modification time, which readers refresh with [`touch`]) are removed
//! first. The compile cache and the store of pulled plugins both grow by one file per
//! plugin version ever loaded, and in a cluster both live in an `emptyDir` whose size
//! limit evicts the Pod when exceeded. (A few lines over `std::fs`; the crates that
//! bound caches on disk manage their own layout, not a directory another part writes.)

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One file of a bounded directory.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CacheFile {
    /// Files of a lower rank go before any of a higher one (entries nothing reads any
    /// more, such as another wasmtime's, before the rest).
    pub rank: u8,
    pub modified: SystemTime,
    /// Bytes it takes on disk ([`disk_bytes`]).
    pub len: u64,
    pub path: PathBuf,
}

/// What a file takes on disk: its length, or the blocks allocated to it if more. A
/// directory of many small files (the compile worker's compiled functions: hundreds of
/// bytes each) takes a block per file, and a volume's size limit counts blocks, as
/// `du` does.
pub fn disk_bytes(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.len().max(meta.blocks().saturating_mul(512))
}

/// Removes files of `dir` (those `rank` names, see [`prune`]; never `kept`) until the
/// rest hold at most `max_bytes`, and logs what went, as `what` (the cache's name).
pub fn keep_within(
    dir: &Path,
    rank: impl Fn(&str) -> Option<u8>,
    max_bytes: u64,
    kept: &Path,
    what: &str,
) -> Pruned {
    let pruned = prune(files_of(dir, rank), max_bytes, kept);
    if pruned.files > 0 {
        tracing::info!(dir = %dir.display(), removed = pruned.files, freed = pruned.bytes,
            left = pruned.left, max = max_bytes,
            "{what} over its bound: least recently used files removed");
    }
    pruned
}

/// The files of `dir` that `rank` names (by file name; `None` leaves a file alone).
fn files_of(dir: &Path, rank: impl Fn(&str) -> Option<u8>) -> Vec<CacheFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    (entries.flatten())
        .filter_map(|e| {
            let rank = rank(&e.file_name().to_string_lossy())?;
            let meta = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some(CacheFile {
                rank,
                modified: meta.modified().ok()?,
                len: disk_bytes(&meta),
                path: e.path(),
            })
        })
        .collect()
}

/// What [`prune`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub files: usize,
    pub bytes: u64,
    /// Bytes of the files left.
    pub left: u64,
}

/// Removes files, lowest rank and least recently used first, never `kept`, until
/// those left hold at most `max_bytes`.
fn prune(mut files: Vec<CacheFile>, max_bytes: u64, kept: &Path) -> Pruned {
    let mut pruned = Pruned {
        left: files.iter().map(|f| f.len).sum(),
        ..Pruned::default()
    };
    files.sort();
    for file in files {
        if pruned.left <= max_bytes {
            break;
        }
        if file.path != kept && std::fs::remove_file(&file.path).is_ok() {
            pruned.files += 1;
            pruned.bytes += file.len;
            pruned.left -= file.len;
        }
    }
    pruned
}

/// How old a temporary file must be to count as a leftover: a write in flight (of
/// another process sharing the directory) takes seconds.
pub const LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the files of `dir` that `leftover` names and that are older than
/// [`LEFTOVER_AGE`]: what a write interrupted by a crash left behind (a temporary file
/// never renamed into place). Called when a cache is opened; returns how many bytes
/// went, and logs them as `what`'s.
pub fn remove_leftovers(dir: &Path, leftover: impl Fn(&str) -> bool, what: &str) -> u64 {
    let before = SystemTime::now() - LEFTOVER_AGE;
    let files = files_of(dir, |name| leftover(name).then_some(0));
    let files: Vec<CacheFile> = files.into_iter().filter(|f| f.modified < before).collect();
    let mut freed = 0;
    for file in &files {
        if std::fs::remove_file(&file.path).is_ok() {
            freed += file.len;
        }
    }
    if !files.is_empty() {
        tracing::info!(dir = %dir.display(), files = files.len(), freed,
            "{what}: interrupted writes removed");
    }
    freed
}

/// Makes `path` look older than [`LEFTOVER_AGE`], as a crash long ago left it.
#[cfg(test)]
pub fn age_past_leftover(path: &Path) {
    let old = SystemTime::now() - LEFTOVER_AGE * 2;
    let file = std::fs::File::options().append(true).open(path);
    file.and_then(|f| f.set_modified(old))
        .expect("an aged file");
}

/// Marks a file as just used; best effort (a read-only cache stays as it is).
pub fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn file(dir: &Path, name: &str, len: usize, age_s: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; len]).expect("write");
        let at = SystemTime::now() - Duration::from_secs(age_s);
        let handle = std::fs::File::options().append(true).open(&path);
        handle.expect("open").set_modified(at).expect("time");
        path
    }

    #[test]
    fn leftovers_of_interrupted_writes_go_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let left = file(dir.path(), "abc.tmp-123", 10, 3600);
        let in_flight = file(dir.path(), "abd.tmp-456", 10, 1);
        let whole = file(dir.path(), "abc", 10, 3600);
        let block = disk_bytes(&std::fs::metadata(&left).expect("file"));
        let freed = remove_leftovers(dir.path(), |n| n.contains(".tmp-"), "test");
        assert_eq!(freed, block);
        assert!(!left.exists() && whole.exists());
        assert!(in_flight.exists(), "a write that may be in flight stays");
    }

    #[test]
    fn the_oldest_of_the_lowest_rank_go_until_the_rest_fit_and_the_kept_one_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let foreign = file(dir.path(), "x.old", 10, 10);
        let oldest = file(dir.path(), "a.new", 10, 300);
        let kept = file(dir.path(), "b.new", 10, 200);
        let recent = file(dir.path(), "c.new", 10, 100);
        file(dir.path(), "not-ours", 1000, 1000);
        let rank = |name: &str| match name.rsplit_once('.') {
            Some((_, "old")) => Some(0),
            Some((_, "new")) => Some(1),
            _ => None,
        };
        let files = files_of(dir.path(), rank);
        assert_eq!(files.len(), 4, "only the named files count");
        // Each 10-byte file takes a block on disk, and counts so.
        let block = disk_bytes(&std::fs::metadata(&kept).expect("file"));
        assert!(block >= 10);
        let pruned = prune(files, block + block / 2, &kept);
        let gone = |p: &PathBuf| !p.exists();
        assert!(
            gone(&foreign) && gone(&oldest),
            "the lower rank, then the oldest"
        );
        assert!(kept.exists(), "never the kept one");
        assert!(gone(&recent), "still over: the next oldest not kept");
        assert_eq!(
            pruned,
            Pruned {
                files: 3,
                bytes: 3 * block,
                left: block
            }
        );
        touch(&kept);
        let modified = std::fs::metadata(&kept).and_then(|m| m.modified());
        assert!(modified.expect("time") > SystemTime::now() - Duration::from_secs(5));
    }
}
