//! Watches the plugins directory and reports a plugin file once it has stopped
//! changing: written in place, copied in slowly, renamed into place, or deleted.
//!
//! Raw events come from `notify` (inotify on Linux). The quiet-period debounce is
//! ours: notify's debouncers report a file that keeps changing at a fixed interval
//! after its first event, so a slow copy (chunks 100 ms apart) would be reported
//! half-written; here a file is reported only once no event has touched it for the
//! quiet period. What is reported is decided by looking at the file then, not by the
//! event kinds: present means "changed" (create, write, rename into place), absent
//! means "removed" (delete, rename away), which covers every sequence of events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What happened to one plugin file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// The file exists and has been quiet for the quiet period.
    Changed(PathBuf),
    /// The file is gone.
    Removed(PathBuf),
}

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch plugins directory {dir}: {source}")]
pub struct WatchError {
    /// The directory.
    pub dir: PathBuf,
    /// notify's error.
    #[source]
    pub source: notify::Error,
}

/// Whether `path` names a plugin: `*.wasm`, not hidden. Editors' and copy tools'
/// temporary files (`.x.wasm.swp`, `x.wasm.tmp`, `x.wasm~`) are not.
pub fn is_plugin_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && name.ends_with(".wasm") && name.len() > ".wasm".len()
}

/// A running watch of one directory; dropping it stops the watch.
pub struct DirWatcher {
    _watcher: RecommendedWatcher,
    changes: mpsc::UnboundedReceiver<FileChange>,
}

impl DirWatcher {
    /// Starts watching `dir` (not recursively) with the given quiet period.
    pub fn start(dir: &Path, quiet: Duration) -> Result<DirWatcher, WatchError> {
        let err = |source| WatchError {
            dir: dir.to_path_buf(),
            source,
        };
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                // Opening or reading a file changes nothing; the host itself reads every
                // plugin it loads, which must not count as a change.
                Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
                Ok(event) => event
                    .paths
                    .into_iter()
                    .filter(|p| is_plugin_file(p))
                    .for_each(|p| {
                        let _ = raw_tx.send(p);
                    }),
                Err(e) => tracing::warn!(error = %e, "plugins directory watch error"),
            })
            .map_err(err)?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(err)?;
        let (tx, changes) = mpsc::unbounded_channel();
        tokio::spawn(debounce(raw_rx, tx, quiet));
        Ok(DirWatcher {
            _watcher: watcher,
            changes,
        })
    }

    /// The next settled change; `None` once the watch has stopped.
    pub async fn next(&mut self) -> Option<FileChange> {
        self.changes.recv().await
    }
}

/// Holds each touched path until it has been quiet for `quiet`, then reports it.
async fn debounce(
    mut raw: mpsc::UnboundedReceiver<PathBuf>,
    out: mpsc::UnboundedSender<FileChange>,
    quiet: Duration,
) {
    let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
    loop {
        let next_due = pending.values().min().copied();
        let sleep = async {
            match next_due {
                Some(due) => tokio::time::sleep_until(due).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            path = raw.recv() => match path {
                Some(path) => {
                    pending.insert(path, Instant::now() + quiet);
                }
                None => return,
            },
            () = sleep => {
                let now = Instant::now();
                let due: Vec<PathBuf> = pending
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(p, _)| p.clone())
                    .collect();
                for path in due {
                    pending.remove(&path);
                    let change = if path.exists() {
                        FileChange::Changed(path)
                    } else {
                        FileChange::Removed(path)
                    };
                    if out.send(change).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_visible_wasm_files_are_plugins() {
        for name in ["pod-counter.wasm", "a.b.wasm"] {
            assert!(is_plugin_file(Path::new(name)), "{name}");
        }
        for name in [
            ".pod-counter.wasm",
            "x.wasm.tmp",
            "x.wasm~",
            ".wasm",
            "x.wat",
            "dir/",
        ] {
            assert!(!is_plugin_file(Path::new(name)), "{name}");
        }
    }

    async fn next(w: &mut DirWatcher) -> FileChange {
        tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .expect("a change within 10 s")
            .expect("watch running")
    }

    #[tokio::test]
    async fn reading_a_plugin_file_is_not_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.wasm");
        std::fs::write(&path, b"\0asm").expect("write");
        let mut w = DirWatcher::start(dir.path(), Duration::from_millis(100)).expect("watch");
        std::fs::read(&path).expect("read");
        let change = tokio::time::timeout(Duration::from_millis(600), w.next()).await;
        assert!(change.is_err(), "a read was reported: {change:?}");
        std::fs::write(&path, b"\0asm\x0d").expect("rewrite");
        assert_eq!(next(&mut w).await, FileChange::Changed(path));
    }

    #[tokio::test]
    async fn a_slow_write_is_reported_once_after_the_last_chunk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = DirWatcher::start(dir.path(), Duration::from_millis(300)).expect("watch");
        let path = dir.path().join("p.wasm");
        let mut file = std::fs::File::create(&path).expect("create");
        for _ in 0..5 {
            std::io::Write::write_all(&mut file, &[0u8; 4096]).expect("write");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(file);
        assert_eq!(next(&mut w).await, FileChange::Changed(path.clone()));
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 5 * 4096);
        let more = tokio::time::timeout(Duration::from_millis(600), w.next()).await;
        assert!(more.is_err(), "reported twice: {more:?}");
    }

    #[tokio::test]
    async fn renames_into_place_and_away_and_deletes_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = DirWatcher::start(dir.path(), Duration::from_millis(100)).expect("watch");
        let tmp = dir.path().join("p.wasm.tmp");
        let path = dir.path().join("p.wasm");
        std::fs::write(&tmp, b"bytes").expect("write");
        std::fs::rename(&tmp, &path).expect("rename in");
        assert_eq!(next(&mut w).await, FileChange::Changed(path.clone()));
        std::fs::rename(&path, dir.path().join("p.wasm.bak")).expect("rename away");
        assert_eq!(next(&mut w).await, FileChange::Removed(path.clone()));
        std::fs::write(&path, b"again").expect("write");
        assert_eq!(next(&mut w).await, FileChange::Changed(path.clone()));
        std::fs::remove_file(&path).expect("delete");
        assert_eq!(next(&mut w).await, FileChange::Removed(path));
    }
}
