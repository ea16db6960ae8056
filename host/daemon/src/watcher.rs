//! Watches the plugins directory and reports a plugin file once it has stopped
//! changing: written in place, copied in slowly, renamed into place, deleted, or
//! swapped underneath a symlink as the kubelet updates a ConfigMap volume.
//!
//! Raw events come from `notify` (inotify on Linux). The quiet-period debounce is
//! ours: notify's debouncers report a file that keeps changing at a fixed interval
//! after its first event, so a slow copy (chunks 100 ms apart) would be reported
//! half-written; here a file is reported only once no event has touched it for the
//! quiet period. What is reported is decided by looking at the file then, not by the
//! event kinds: present means "changed" (create, write, rename into place), absent
//! means "removed" (delete, rename away), which covers every sequence of events.
//! A rename is atomic: a file renamed into place (`mv`, the documented way to drop a
//! plugin in) is complete, so it is reported at once, without the quiet period.
//!
//! A ConfigMap volume holds `x.wasm -> ..data/x.wasm` symlinks; an update writes a new
//! hidden directory and swaps the `..data` link, so no event names `x.wasm`. Any event
//! on another entry of the directory therefore triggers a rescan, which compares what
//! every plugin file resolves to with what it resolved to before. The directory itself
//! is checked every [`RECHECK`]: deleted and created again, or re-pointed (a symlinked
//! directory), it is watched anew and rescanned; a rescan also runs then, catching
//! anything an event could not tell.

mod listing;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::ModifyKind;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use listing::{Listing, dir_identity};
use wcm_core::plugin::file::is_plugin_file;

/// How often the directory's identity is checked and its listing compared.
pub const RECHECK: Duration = Duration::from_secs(2);

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

/// The plugin a change of `path` is a change of: the plugin file itself, or the
/// plugin whose settings file it is (`x.settings.json` → `x.wasm`).
pub fn plugin_touched_by(path: &Path) -> Option<PathBuf> {
    match is_plugin_file(path) {
        true => Some(path.to_path_buf()),
        false => wcm_core::runtime::settings::plugin_of(path),
    }
}

/// What a raw event asks for.
#[derive(Debug)]
enum Touched {
    /// A plugin file was touched; `renamed` when by a rename, which leaves it whole.
    Plugin { path: PathBuf, renamed: bool },
    /// Something else in the directory changed: look at every plugin again.
    Other,
}

/// A running watch of one directory; dropping it stops the watch.
pub struct DirWatcher {
    changes: mpsc::UnboundedReceiver<FileChange>,
}

impl DirWatcher {
    /// Starts watching `dir` (not recursively) with the given quiet period.
    pub fn start(dir: &Path, quiet: Duration) -> Result<DirWatcher, WatchError> {
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let watch = watch(dir, raw_tx.clone())?;
        let (tx, changes) = mpsc::unbounded_channel();
        let state = WatchState {
            dir: dir.to_path_buf(),
            identity: dir_identity(dir),
            listing: Listing::read(dir),
            watch: Some(watch),
            raw_tx,
        };
        tokio::spawn(state.run(raw_rx, tx, quiet));
        Ok(DirWatcher { changes })
    }

    /// The next settled change; `None` once the watch has stopped.
    pub async fn next(&mut self) -> Option<FileChange> {
        self.changes.recv().await
    }
}

/// A notify watch of `dir` whose events go to `raw`.
fn watch(
    dir: &Path,
    raw: mpsc::UnboundedSender<Touched>,
) -> Result<RecommendedWatcher, WatchError> {
    let err = |source| WatchError {
        dir: dir.to_path_buf(),
        source,
    };
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            // Opening or reading a file changes nothing; the host itself reads every
            // plugin it loads, which must not count as a change.
            Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
            Ok(event) => event.paths.into_iter().for_each(|p| {
                let renamed = matches!(event.kind, EventKind::Modify(ModifyKind::Name(_)));
                let touched = match plugin_touched_by(&p) {
                    Some(path) => Touched::Plugin { path, renamed },
                    None => Touched::Other,
                };
                let _ = raw.send(touched);
            }),
            Err(e) => tracing::warn!(error = %e, "plugins directory watch error"),
        })
        .map_err(err)?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(err)?;
    Ok(watcher)
}

/// The watch task's state: the directory as last seen, and the notify watch on it.
struct WatchState {
    dir: PathBuf,
    identity: Option<(u64, u64)>,
    listing: Listing,
    /// None while the directory is missing.
    watch: Option<RecommendedWatcher>,
    raw_tx: mpsc::UnboundedSender<Touched>,
}

impl WatchState {
    /// Holds each touched path until it has been quiet for `quiet`, then reports it;
    /// rescans on other events and every [`RECHECK`].
    async fn run(
        mut self,
        mut raw: mpsc::UnboundedReceiver<Touched>,
        out: mpsc::UnboundedSender<FileChange>,
        quiet: Duration,
    ) {
        let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
        let mut recheck = tokio::time::interval(RECHECK);
        loop {
            let next_due = pending.values().min().copied();
            let sleep = async {
                match next_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                touched = raw.recv() => match touched {
                    Some(Touched::Plugin { path, renamed }) => {
                        let wait = if renamed { Duration::ZERO } else { quiet };
                        pending.insert(path, Instant::now() + wait);
                    }
                    Some(Touched::Other) => self.rescan(&mut pending, quiet),
                    None => return,
                },
                _ = recheck.tick() => {
                    self.recheck_dir();
                    self.rescan(&mut pending, quiet);
                }
                () = sleep => {
                    if !report_due(&mut pending, &out) {
                        return;
                    }
                }
            }
        }
    }

    /// Marks every plugin file whose resolved content moved since the last look.
    fn rescan(&mut self, pending: &mut HashMap<PathBuf, Instant>, quiet: Duration) {
        let now = Listing::read(&self.dir);
        for path in self.listing.changed_in(&now) {
            pending.insert(path, Instant::now() + quiet);
        }
        self.listing = now;
    }

    /// Watches the directory anew if it was deleted and created again, or re-pointed.
    fn recheck_dir(&mut self) {
        let identity = dir_identity(&self.dir);
        if identity == self.identity {
            return;
        }
        tracing::info!(dir = %self.dir.display(), present = identity.is_some(),
            "plugins directory replaced; watching it anew");
        self.identity = identity;
        self.watch = None;
        if identity.is_some() {
            match watch(&self.dir, self.raw_tx.clone()) {
                Ok(w) => self.watch = Some(w),
                Err(e) => tracing::warn!(error = %e, "cannot watch the plugins directory again"),
            }
        }
    }
}

/// Reports every path whose quiet period is over: changed if present, removed if not.
/// Returns false once nobody listens.
fn report_due(
    pending: &mut HashMap<PathBuf, Instant>,
    out: &mpsc::UnboundedSender<FileChange>,
) -> bool {
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
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn a_file_renamed_into_place_is_reported_without_the_quiet_period() {
        let dir = tempfile::tempdir().expect("tempdir");
        let quiet = Duration::from_secs(30);
        let mut w = DirWatcher::start(dir.path(), quiet).expect("watch");
        let tmp = dir.path().join(".p.wasm.tmp");
        let path = dir.path().join("p.wasm");
        std::fs::write(&tmp, b"whole").expect("write");
        std::fs::rename(&tmp, &path).expect("rename in");
        let change = tokio::time::timeout(quiet / 3, w.next()).await;
        assert_eq!(change.ok().flatten(), Some(FileChange::Changed(path)));
    }

    /// Writes the ConfigMap-volume layout the kubelet keeps: a timestamped hidden
    /// directory with the files, `..data` pointing at it, a symlink per key.
    fn configmap_update(dir: &Path, generation: u32, files: &[(&str, &[u8])]) {
        use std::os::unix::fs::symlink;
        let data = format!("..2026_12_03_00_00_0{generation}");
        std::fs::create_dir(dir.join(&data)).expect("data dir");
        for (name, bytes) in files {
            std::fs::write(dir.join(&data).join(name), bytes).expect("write");
        }
        symlink(&data, dir.join("..data_tmp")).expect("link");
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("swap");
        for (name, _) in files {
            let link = dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(format!("..data/{name}"), link).expect("key link");
            }
        }
    }

    #[tokio::test]
    async fn a_configmap_volume_update_is_seen_through_its_symlinks() {
        let dir = tempfile::tempdir().expect("tempdir");
        configmap_update(dir.path(), 1, &[("p.wasm", b"one")]);
        let mut w = DirWatcher::start(dir.path(), Duration::from_millis(100)).expect("watch");
        let p = dir.path().join("p.wasm");
        configmap_update(dir.path(), 2, &[("p.wasm", b"two")]);
        assert_eq!(next(&mut w).await, FileChange::Changed(p.clone()));
        assert_eq!(std::fs::read(&p).expect("read"), b"two");
        configmap_update(dir.path(), 3, &[("p.wasm", b"two"), ("q.wasm", b"new")]);
        let mut seen = vec![next(&mut w).await];
        let more = tokio::time::timeout(Duration::from_millis(700), w.next()).await;
        seen.extend(more.ok().flatten());
        assert!(
            seen.contains(&FileChange::Changed(dir.path().join("q.wasm"))),
            "{seen:?}"
        );
        // A key removed: the kubelet deletes its link.
        configmap_update(dir.path(), 4, &[("q.wasm", b"new")]);
        std::fs::remove_file(&p).expect("unlink");
        let removed = loop {
            match next(&mut w).await {
                FileChange::Removed(path) => break path,
                FileChange::Changed(_) => continue,
            }
        };
        assert_eq!(removed, p);
    }

    #[tokio::test]
    async fn a_directory_deleted_and_created_again_is_watched_anew() {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = parent.path().join("plugins");
        std::fs::create_dir(&dir).expect("dir");
        let mut w = DirWatcher::start(&dir, Duration::from_millis(100)).expect("watch");
        std::fs::remove_dir(&dir).expect("remove dir");
        tokio::time::sleep(RECHECK + Duration::from_millis(500)).await;
        std::fs::create_dir(&dir).expect("dir again");
        tokio::time::sleep(RECHECK + Duration::from_millis(500)).await;
        let path = dir.join("p.wasm");
        std::fs::write(&path, b"bytes").expect("write");
        assert_eq!(next(&mut w).await, FileChange::Changed(path));
    }

    #[tokio::test]
    async fn a_re_pointed_directory_link_reports_what_it_points_at_now() {
        use std::os::unix::fs::symlink;
        let parent = tempfile::tempdir().expect("tempdir");
        let (a, b) = (parent.path().join("a"), parent.path().join("b"));
        std::fs::create_dir(&a).expect("a");
        std::fs::create_dir(&b).expect("b");
        std::fs::write(b.join("p.wasm"), b"in b").expect("write");
        let link = parent.path().join("plugins");
        symlink(&a, &link).expect("link");
        let mut w = DirWatcher::start(&link, Duration::from_millis(100)).expect("watch");
        std::fs::remove_file(&link).expect("unlink");
        symlink(&b, &link).expect("re-point");
        assert_eq!(next(&mut w).await, FileChange::Changed(link.join("p.wasm")));
        std::fs::write(link.join("q.wasm"), b"new in b").expect("write");
        assert_eq!(next(&mut w).await, FileChange::Changed(link.join("q.wasm")));
    }
}
