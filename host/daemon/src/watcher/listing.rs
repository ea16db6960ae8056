//! What the plugins directory holds, file by file, as the files resolve: a plugin that
//! is a symlink (a ConfigMap volume's `x.wasm -> ..data/x.wasm`) changes when the
//! link's target does, though the link itself never changes. A plugin's settings file
//! is listed too, and its change is a change of the plugin.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::plugin_touched_by;

/// Identity of a resolved file: device, inode, size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Signature {
    fn of(path: &Path) -> Option<Signature> {
        let meta = std::fs::metadata(path).ok()?; // follows symlinks
        meta.is_file().then(|| Signature {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }
}

/// The plugin files of one directory and their signatures.
#[derive(Debug, Default)]
pub(super) struct Listing {
    files: HashMap<PathBuf, Signature>,
}

impl Listing {
    /// The plugin files of `dir` now (none if it cannot be read).
    pub(super) fn read(dir: &Path) -> Listing {
        let mut files = HashMap::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if let (Some(_), Some(sig)) = (plugin_touched_by(&path), Signature::of(&path)) {
                files.insert(path, sig);
            }
        }
        Listing { files }
    }

    /// Plugins whose file or settings appeared, vanished or resolve to another file
    /// in `now`.
    pub(super) fn changed_in(&self, now: &Listing) -> Vec<PathBuf> {
        let mut changed: Vec<PathBuf> = now
            .files
            .iter()
            .filter(|(p, sig)| self.files.get(*p) != Some(sig))
            .map(|(p, _)| p.clone())
            .collect();
        changed.extend(
            self.files
                .keys()
                .filter(|p| !now.files.contains_key(*p))
                .cloned(),
        );
        let mut plugins: Vec<PathBuf> = changed
            .iter()
            .filter_map(|p| plugin_touched_by(p))
            .collect();
        plugins.sort();
        plugins.dedup();
        plugins
    }
}

/// The identity (device, inode) of `dir` as it resolves now, if it exists.
pub(super) fn dir_identity(dir: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(dir).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn a_symlinked_plugin_changes_with_its_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("..a"), dir.path().join("..b"));
        std::fs::create_dir(&a).expect("a");
        std::fs::create_dir(&b).expect("b");
        std::fs::write(a.join("p.wasm"), b"one").expect("write");
        std::fs::write(b.join("p.wasm"), b"two").expect("write");
        symlink("..a", dir.path().join("..data")).expect("link");
        symlink("..data/p.wasm", dir.path().join("p.wasm")).expect("link");
        let before = Listing::read(dir.path());
        assert!(before.changed_in(&Listing::read(dir.path())).is_empty());
        std::fs::remove_file(dir.path().join("..data")).expect("unlink");
        symlink("..b", dir.path().join("..data")).expect("relink");
        let after = Listing::read(dir.path());
        assert_eq!(before.changed_in(&after), vec![dir.path().join("p.wasm")]);
        std::fs::remove_file(dir.path().join("p.wasm")).expect("remove");
        let gone = Listing::read(dir.path());
        assert_eq!(after.changed_in(&gone), vec![dir.path().join("p.wasm")]);
    }

    #[test]
    fn a_settings_file_that_changes_is_a_change_of_its_plugin() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("p.wasm"), b"code").expect("write");
        let before = Listing::read(dir.path());
        let settings = dir.path().join("p.settings.yaml");
        std::fs::write(&settings, b"a: 1").expect("write");
        let added = Listing::read(dir.path());
        assert_eq!(before.changed_in(&added), vec![dir.path().join("p.wasm")]);
        std::fs::write(dir.path().join("notes.yaml"), b"x").expect("write");
        assert!(
            added.changed_in(&Listing::read(dir.path())).is_empty(),
            "not a settings file"
        );
        std::fs::remove_file(&settings).expect("remove");
        let removed = Listing::read(dir.path());
        assert_eq!(added.changed_in(&removed), vec![dir.path().join("p.wasm")]);
    }
}
