//! The on-disk cache of compiled plugins, keyed by content hash, so a restart or a
//! re-upload of the same bytes does not compile again.
//!
//! An entry is named `<sha256 of the component>-<engine fingerprint>.cwasm`, where the
//! fingerprint hashes wasmtime's own compatibility settings (version, target, compiler
//! flags): a host with another wasmtime or other settings looks for another name. Each
//! file is the serialised artifact followed by its SHA-256 and a magic line; the digest
//! is checked (reading the file, not keeping it) before wasmtime sees it, and wasmtime
//! then checks its own header (version, engine configuration) again. A corrupted,
//! truncated or foreign entry is reported and recompiled over, never loaded. Entries
//! are written to a temporary file and renamed into place, so a crash mid-write leaves
//! no half entry under a real name, and an entry in use is never rewritten in place.
//!
//! Loaded code is *mapped* from its entry, not copied into the heap: the artifact comes
//! first in the file so wasmtime can map it as it is (`deserialize_file`), and only
//! the pages a plugin touches are resident, shared with the page cache, which the
//! kernel can drop and read again under memory pressure. A thousand plugins installed
//! cost the memory of the code they run, not of all the code they hold.
//!
//! The directory is bounded (`--compile-cache-max-mib`): each version of each plugin
//! ever loaded adds an entry (a Python plugin's is some 36 MB), so after a write the
//! least recently used entries, by modification time (a read touches its entry), are
//! removed until the rest fit. Entries of another wasmtime go first, as nothing reads
//! them.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::entry::{EntryError, load_entry, write_entry};
use crate::disk_bound;

/// The subdirectory of the compile worker's compiled functions.
const FUNCTIONS: &str = "functions";

/// Where a plugin's compiled code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled now (no usable cache entry).
    Compiled,
    /// Read from the cache.
    Cached,
    /// Already loaded for another file with the same bytes (a copy of a plugin under
    /// another name): its compiled code is shared, not loaded again.
    Shared,
}

/// The SHA-256 of `bytes`, lower-case hex: a plugin's identity in logs and status.
pub fn content_hash(bytes: &[u8]) -> String {
    crate::sha256::hex_of(bytes)
}

/// Feeds `Hash` input into SHA-256, for a fingerprint that is stable across runs and
/// Rust versions (unlike `DefaultHasher`).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        0 // unused: the digest is read with `finalize`
    }
}

/// A directory of compiled components for one engine.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    fingerprint: String,
    max_bytes: u64,
    /// The hashes whose entries are never pruned, with how many pins each has.
    pins: Pins,
}

type Pins = Arc<Mutex<HashMap<String, usize>>>;

/// Keeps one entry out of the cache's pruning while it lives: the code of a plugin
/// that runs here but is not kept in memory is read from its entry again when the
/// plugin is wanted (`runtime::resident`), so that entry must stay.
#[derive(Debug)]
pub struct EntryPin {
    pins: Pins,
    hash: String,
}

impl Drop for EntryPin {
    fn drop(&mut self) {
        let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = pins.get_mut(&self.hash) {
            *count -= 1;
            if *count == 0 {
                pins.remove(&self.hash);
            }
        }
    }
}

impl ArtifactCache {
    /// A cache in `dir` for artifacts of `engine`; the directory is created on first write.
    pub fn new(dir: &Path, engine: &Engine) -> ArtifactCache {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let fingerprint = crate::sha256::hex(&hasher.0.finalize()[..8]);
        // What a write interrupted by a crash left (a `NamedTempFile`, `.tmpXXXXXX`).
        let leftover = |name: &str| name.starts_with(".tmp");
        disk_bound::remove_leftovers(dir, leftover, "compile cache");
        disk_bound::remove_leftovers(&dir.join(FUNCTIONS), leftover, "compiled functions");
        ArtifactCache {
            dir: dir.to_path_buf(),
            fingerprint,
            max_bytes: crate::config::DEFAULT_COMPILE_CACHE_MAX_BYTES,
            pins: Pins::default(),
        }
    }

    /// Keeps the entry of `hash` while the pin lives: pruning passes it by.
    pub fn pin(&self, hash: &str) -> EntryPin {
        let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        *pins.entry(hash.to_string()).or_default() += 1;
        EntryPin {
            pins: self.pins.clone(),
            hash: hash.to_string(),
        }
    }

    /// The same cache, holding at most `max_bytes` of entries.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> ArtifactCache {
        self.max_bytes = max_bytes;
        self
    }

    /// The directory of the compile worker's compiled functions
    /// ([`super::functions::FunctionStore`]).
    pub fn functions_dir(&self) -> PathBuf {
        functions_dir_of(&self.dir)
    }

    /// Keeps the compiled functions within their share of the cache's bound, least
    /// recently used first (after every entry written: a compile is what adds them).
    fn prune_functions(&self) {
        let rank = |name: &str| (!name.starts_with(".tmp")).then_some(0u8);
        let (dir, max) = (self.functions_dir(), functions_share(self.max_bytes));
        disk_bound::keep_within(&dir, rank, max, Path::new(""), "compiled functions");
    }

    /// The entry file for a component with this content hash.
    pub fn entry_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}-{}.cwasm", self.fingerprint))
    }

    /// The cached component with content hash `hash`: `Ok(None)` if there is no entry,
    /// `Err` if there is one that must not be used.
    pub fn read(&self, engine: &Engine, hash: &str) -> Result<Option<Component>, EntryError> {
        let path = self.entry_path(hash);
        let component = match load_entry(engine, &path, u64::MAX) {
            Err(EntryError::Unreadable(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            loaded => loaded?,
        };
        disk_bound::touch(&path);
        Ok(Some(component))
    }

    /// A new temporary file in the cache's directory, for the compile worker to write
    /// an entry into; [`ArtifactCache::adopt`] then renames it into place.
    pub fn new_entry_file(&self) -> std::io::Result<tempfile::NamedTempFile> {
        std::fs::create_dir_all(&self.dir)?;
        tempfile::NamedTempFile::new_in(&self.dir)
    }

    /// Keeps `file` (an entry written by `entry::write_entry`, already loaded once) as the
    /// entry of `hash`; failures are logged, as [`ArtifactCache::write`]'s are.
    pub fn adopt(&self, hash: &str, file: tempfile::NamedTempFile) {
        let path = self.entry_path(hash);
        match file.persist(&path) {
            Ok(_) => self.prune(&path),
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the compile cache")
            }
        }
    }

    /// Stores `component` under `hash`; failures are logged, never fatal (the plugin
    /// runs either way, it only compiles again next time).
    pub fn write(&self, hash: &str, component: &Component) {
        if let Err(e) = self.try_write(hash, component) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the compile cache");
        }
    }

    fn try_write(
        &self,
        hash: &str,
        component: &Component,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let payload = component.serialize()?;
        let mut file = self.new_entry_file()?;
        write_entry(&mut file, &payload)?;
        self.adopt(hash, file);
        Ok(())
    }

    /// Removes the least recently used entries (another wasmtime's first; never
    /// `kept`, just written, nor a pinned one) until the rest hold their share of the
    /// bound, then the compiled functions until they hold theirs.
    fn prune(&self, kept: &Path) {
        let fingerprint = format!("-{}.cwasm", self.fingerprint);
        let pins = self.pins.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let rank = |name: &str| {
            let ours = name.strip_suffix(&fingerprint);
            if ours.is_some_and(|hash| pins.contains_key(hash)) {
                return None;
            }
            name.ends_with(".cwasm").then(|| u8::from(ours.is_some()))
        };
        let max = self.max_bytes - functions_share(self.max_bytes);
        disk_bound::keep_within(&self.dir, rank, max, kept, "compile cache");
        self.prune_functions();
    }
}

/// The directory of compiled functions of the compile cache in `cache_dir`.
pub fn functions_dir_of(cache_dir: &Path) -> PathBuf {
    cache_dir.join(FUNCTIONS)
}

/// The part of a compile cache's bound its compiled functions may hold: a quarter. The
/// entries, what loads, keep the rest; the functions only speed a compile up.
fn functions_share(max_bytes: u64) -> u64 {
    max_bytes / 4
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    const COMPONENT: &str = "(component)";

    fn setup() -> (tempfile::TempDir, Engine, ArtifactCache, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::default();
        let cache = ArtifactCache::new(dir.path(), &engine);
        let hash = content_hash(COMPONENT.as_bytes());
        (dir, engine, cache, hash)
    }

    #[test]
    fn an_entry_written_is_read_back() {
        let (_dir, engine, cache, hash) = setup();
        assert!(
            cache
                .read(&engine, &hash)
                .expect("no entry is fine")
                .is_none()
        );
        let component = Component::new(&engine, COMPONENT).expect("compiles");
        cache.write(&hash, &component);
        assert!(cache.read(&engine, &hash).expect("valid entry").is_some());
    }

    #[test]
    fn a_corrupted_or_foreign_entry_is_refused() {
        let (_dir, engine, cache, hash) = setup();
        cache.write(
            &hash,
            &Component::new(&engine, COMPONENT).expect("compiles"),
        );
        let path = cache.entry_path(&hash);
        let entry = std::fs::read(&path).expect("entry");
        let mut bytes = entry.clone();
        bytes[entry.len() / 2] ^= 0xff;
        std::fs::write(&path, &bytes).expect("rewrite");
        assert!(matches!(
            cache.read(&engine, &hash),
            Err(EntryError::Corrupted)
        ));
        std::fs::write(&path, b"\0asm").expect("rewrite");
        assert!(matches!(
            cache.read(&engine, &hash),
            Err(EntryError::Foreign)
        ));
        // The first layout: magic and digest in front of the artifact.
        let payload = &entry[..entry.len() - crate::runtime::entry::TRAILER];
        let first = [&b"WCMART1\n"[..], &Sha256::digest(payload), payload].concat();
        std::fs::write(&path, first).expect("rewrite");
        assert!(matches!(
            cache.read(&engine, &hash),
            Err(EntryError::Foreign)
        ));
        let len = entry.len() as u64;
        std::fs::write(&path, &entry).expect("rewrite");
        let err = load_entry(&engine, &path, len - 1).expect_err("over its bound");
        assert_eq!(
            err.to_string(),
            format!(
                "{len} bytes, more than the {} its writer is bounded to",
                len - 1
            )
        );
        load_entry(&engine, &path, len).expect("within its bound");
    }

    #[test]
    fn a_mapped_entry_runs_after_its_file_is_replaced_or_removed() {
        let (_dir, engine, cache, _) = setup();
        let wat = r#"(component
            (core module $m (func (export "f") (result i32) i32.const 7))
            (core instance $i (instantiate $m))
            (func (export "f") (result u32) (canon lift (core func $i "f"))))"#;
        let hash = content_hash(wat.as_bytes());
        cache.write(&hash, &Component::new(&engine, wat).expect("compiles"));
        let component = cache.read(&engine, &hash).expect("valid").expect("found");
        // Replaced by a rename (as a new write does), then removed (as pruning does).
        cache.write(&hash, &Component::new(&engine, wat).expect("compiles"));
        std::fs::remove_file(cache.entry_path(&hash)).expect("removed");
        let mut store = wasmtime::Store::new(&engine, ());
        let linker = wasmtime::component::Linker::new(&engine);
        let instance = linker
            .instantiate(&mut store, &component)
            .expect("instance");
        let f = instance
            .get_typed_func::<(), (u32,)>(&mut store, "f")
            .expect("f");
        assert_eq!(f.call(&mut store, ()).expect("runs"), (7,));
    }

    #[test]
    fn over_its_bound_the_least_recently_used_entries_go_first() {
        let (dir, engine, cache, _) = setup();
        let sources = [
            "(component)",
            "(component (core module))",
            "(component (core module) (core module))",
        ];
        let components: Vec<(String, Component)> = (sources.iter())
            .map(|s| {
                (
                    content_hash(s.as_bytes()),
                    Component::new(&engine, s).expect("compiles"),
                )
            })
            .collect();
        let old = SystemTime::now() - std::time::Duration::from_secs(3600);
        let age = |path: &Path| {
            let file = std::fs::File::options()
                .append(true)
                .open(path)
                .expect("entry");
            file.set_modified(old).expect("set time");
        };
        for (hash, component) in &components {
            cache.write(hash, component);
            age(&cache.entry_path(hash));
        }
        let [(a, _), (b, _), (c, component_c)] = &components[..] else {
            unreachable!()
        };
        // Reading `a` makes `b` the least recently used of this engine's entries.
        assert!(cache.read(&engine, a).expect("valid").is_some());
        // An entry of another wasmtime, as old as the rest.
        let foreign = dir.path().join(format!("{a}-0000000000000000.cwasm"));
        std::fs::write(&foreign, b"old").expect("foreign");
        age(&foreign);
        let size = |hash: &str| {
            disk_bound::disk_bytes(&std::fs::metadata(cache.entry_path(hash)).expect("entry"))
        };
        // Entries keep three quarters of the bound, the compiled functions the rest.
        let bounded = cache
            .clone()
            .with_max_bytes((size(a) + size(c)) * 4 / 3 + 4);
        bounded.write(c, component_c);
        let kept = |hash: &str| cache.entry_path(hash).exists();
        assert!(!foreign.exists(), "another wasmtime's entry goes first");
        assert!(!kept(b), "the least recently used goes");
        assert!(kept(a) && kept(c), "the one read and the one written stay");
    }

    #[test]
    fn a_pinned_entry_is_never_pruned_and_is_again_once_unpinned() {
        let (_dir, engine, cache, _) = setup();
        let sources = ["(component)", "(component (core module))"];
        let entries: Vec<(String, Component)> = (sources.iter())
            .map(|s| {
                (
                    content_hash(s.as_bytes()),
                    Component::new(&engine, s).expect("compiles"),
                )
            })
            .collect();
        let [(a, component_a), (b, component_b)] = &entries[..] else {
            unreachable!()
        };
        cache.write(a, component_a);
        let pin = cache.pin(a);
        let bounded = cache.clone().with_max_bytes(1);
        bounded.write(b, component_b);
        assert!(
            cache.entry_path(a).exists(),
            "a pinned entry stays past the bound"
        );
        drop(pin);
        bounded.write(b, component_b);
        assert!(
            !cache.entry_path(a).exists(),
            "unpinned, it is pruned again"
        );
        assert!(cache.entry_path(b).exists());
    }

    #[test]
    fn the_compiled_functions_keep_within_a_quarter_of_the_bound_counted_in_blocks() {
        let (_dir, _engine, cache, _) = setup();
        let functions = cache.functions_dir();
        std::fs::create_dir_all(&functions).expect("dir");
        for (i, age_s) in [(0, 300), (1, 200), (2, 100)] {
            let path = functions.join(format!("f{i}"));
            std::fs::write(&path, [0u8; 60]).expect("function");
            let at = SystemTime::now() - std::time::Duration::from_secs(age_s);
            let file = std::fs::File::options().append(true).open(&path);
            file.expect("open").set_modified(at).expect("time");
        }
        // Each small file counts as the block it takes; a quarter of the bound holds
        // one and a half.
        let block = disk_bound::disk_bytes(&std::fs::metadata(functions.join("f0")).expect("f0"));
        cache.with_max_bytes(6 * block).prune_functions();
        let left: Vec<bool> = (0..3)
            .map(|i| functions.join(format!("f{i}")).exists())
            .collect();
        assert_eq!(left, [false, false, true], "the newest stays");
    }

    #[test]
    fn an_artifact_of_another_engine_configuration_is_refused() {
        let (_dir, engine, cache, hash) = setup();
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let other = Engine::new(&config).expect("engine");
        cache.write(&hash, &Component::new(&other, COMPONENT).expect("compiles"));
        // Same file name on purpose: the fingerprint would normally keep them apart.
        let err = cache.read(&engine, &hash).expect_err("must be refused");
        assert!(matches!(err, EntryError::Incompatible(_)), "{err}");
    }
}
