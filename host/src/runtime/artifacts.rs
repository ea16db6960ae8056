//! The on-disk cache of compiled plugins, keyed by content hash, so a restart or a
//! re-upload of the same bytes does not compile again.
//!
//! An entry is named `<sha256 of the component>-<engine fingerprint>.cwasm`, where the
//! fingerprint hashes wasmtime's own compatibility settings (version, target, compiler
//! flags): a host with another wasmtime or other settings looks for another name. Each
//! file starts with a magic line and the SHA-256 of the serialised artifact after it,
//! and is checked before wasmtime sees it; wasmtime then checks its own header
//! (version, engine configuration) again. A corrupted, truncated or foreign entry is
//! reported and recompiled over, never loaded. Entries are written to a temporary file
//! and renamed into place, so a crash mid-write leaves no half entry under a real name.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// First bytes of every entry; bump the digit when the layout changes.
const MAGIC: &[u8; 8] = b"WCMART1\n";
const DIGEST_LEN: usize = 32;

/// Why a cache entry was not used (it is then recompiled and rewritten).
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// The file is shorter than its header or does not start with our magic.
    #[error("not a cache entry of this host")]
    Foreign,
    /// The stored digest does not match the content.
    #[error("corrupted: content digest mismatch")]
    Corrupted,
    /// wasmtime refused the artifact (another version or engine configuration).
    #[error("rejected by wasmtime: {0}")]
    Incompatible(String),
}

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
}

impl ArtifactCache {
    /// A cache in `dir` for artifacts of `engine`; the directory is created on first write.
    pub fn new(dir: &Path, engine: &Engine) -> ArtifactCache {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let fingerprint = crate::sha256::hex(&hasher.0.finalize()[..8]);
        ArtifactCache {
            dir: dir.to_path_buf(),
            fingerprint,
        }
    }

    /// The entry file for a component with this content hash.
    pub fn entry_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}-{}.cwasm", self.fingerprint))
    }

    /// The cached component with content hash `hash`: `Ok(None)` if there is no entry,
    /// `Err` if there is one that must not be used.
    pub fn read(&self, engine: &Engine, hash: &str) -> Result<Option<Component>, EntryError> {
        let Ok(bytes) = std::fs::read(self.entry_path(hash)) else {
            return Ok(None);
        };
        let payload = verified_payload(&bytes)?;
        deserialize(engine, payload).map(Some)
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
        std::fs::create_dir_all(&self.dir)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        std::io::Write::write_all(&mut file, MAGIC)?;
        std::io::Write::write_all(&mut file, &Sha256::digest(&payload))?;
        std::io::Write::write_all(&mut file, &payload)?;
        file.persist(self.entry_path(hash))?;
        Ok(())
    }
}

/// The artifact inside an entry, if the header and digest are right.
fn verified_payload(bytes: &[u8]) -> Result<&[u8], EntryError> {
    let header = MAGIC.len() + DIGEST_LEN;
    if bytes.len() < header || &bytes[..MAGIC.len()] != MAGIC {
        return Err(EntryError::Foreign);
    }
    let (digest, payload) = bytes[MAGIC.len()..].split_at(DIGEST_LEN);
    if Sha256::digest(payload).as_slice() != digest {
        return Err(EntryError::Corrupted);
    }
    Ok(payload)
}

/// Turns a verified artifact back into a component.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, payload: &[u8]) -> Result<Component, EntryError> {
    // SAFETY: wasmtime requires the bytes to be an artifact it produced itself. They
    // are: this host wrote the entry (`try_write`, from `Component::serialize`) into a
    // directory it owns, and the SHA-256 stored with it has just been checked, so
    // accidental corruption is caught before this point. wasmtime also checks its own
    // header and refuses artifacts of another version or engine configuration.
    unsafe { Component::deserialize(engine, payload) }
        .map_err(|e| EntryError::Incompatible(super::chain(&e)))
}

#[cfg(test)]
mod tests {
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
        let mut bytes = std::fs::read(&path).expect("entry");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
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
