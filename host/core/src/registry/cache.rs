//! Plugins pulled from registries, kept on disk by digest, so a restart (or a second
//! `WasmPlugin` naming the same artifact) does not pull again.
//!
//! Content-addressed: a component lives at `layers/sha256/<hex>` and is taken from
//! there only if its bytes still hash to that name; a manifest digest maps to its
//! layer through `manifests/sha256/<hex>`, written after the layer. Files are written
//! to a temporary name and renamed, so a crash leaves no half file under a digest.
//! The layers are bounded (`--pulled-plugins-max-mib`): past the bound the least
//! recently used go (a layer taken from here is touched); a manifest whose layer went
//! is pulled again when next needed.

use std::path::{Path, PathBuf};

use super::manifest::is_sha256;
use super::{Pulled, Reference, RegistryError, Session};
use crate::disk_bound;

/// A plugin fetched by digest.
#[derive(Debug)]
pub struct Fetched {
    /// The manifest's digest.
    pub digest: String,
    /// The component.
    pub bytes: Vec<u8>,
    /// Whether it came from the disk rather than the registry.
    pub cached: bool,
}

/// How many bytes of layers a store keeps unless told otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

/// The on-disk store of pulled plugins.
#[derive(Debug, Clone)]
pub struct PulledPlugins {
    dir: PathBuf,
    max_bytes: u64,
}

impl PulledPlugins {
    /// A store in `dir` (created when first written).
    pub fn new(dir: &Path) -> PulledPlugins {
        PulledPlugins {
            dir: dir.to_path_buf(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// The same store, keeping at most `max_bytes` of layers.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> PulledPlugins {
        self.max_bytes = max_bytes;
        self
    }

    /// The plugin at `reference`: from disk when it is pinned to a digest held here
    /// intact, else pulled in `session` (at most `max_bytes`) and kept. (A tag is
    /// resolved by the caller, which needs the digest first: signatures name it.)
    pub async fn fetch(
        &self,
        session: &mut Session<'_>,
        reference: &Reference,
        max_bytes: u64,
    ) -> Result<Fetched, RegistryError> {
        if let Some(fetched) = self.fetch_cached(reference).await {
            return Ok(fetched);
        }
        let pulled = super::pull(session, reference, max_bytes).await?;
        let Pulled { digest, bytes, .. } = pulled;
        if let Err(e) = self.keep(&digest, &bytes).await {
            tracing::warn!(reference = %reference, error = %e,
                "a pulled plugin could not be kept on disk; it will be pulled again");
        }
        Ok(Fetched {
            digest,
            bytes,
            cached: false,
        })
    }

    /// The plugin at `reference` if it is pinned to a digest kept intact here; nothing
    /// is pulled (a standby's load).
    pub async fn fetch_cached(&self, reference: &Reference) -> Option<Fetched> {
        let digest = reference.digest()?;
        let bytes = self.cached(digest).await?;
        Some(Fetched {
            digest: digest.to_string(),
            bytes,
            cached: true,
        })
    }

    /// Whether manifest `digest` was verified by the key of digest `key` on this disk.
    pub async fn is_verified(&self, digest: &str, key: &str) -> bool {
        self.is_marked("verified", digest, key).await
    }

    /// Notes that manifest `digest` was verified by the key of digest `key`.
    pub async fn mark_verified(&self, digest: &str, key: &str) {
        self.mark("verified", digest, key).await
    }

    /// Whether the registry let credentials of fingerprint `credentials` read
    /// manifest `digest` (see [`super::RegistryAuth::fingerprint`]).
    pub async fn is_readable_with(&self, digest: &str, credentials: &str) -> bool {
        self.is_marked("readable", digest, credentials).await
    }

    /// Notes that credentials of fingerprint `credentials` may read manifest `digest`.
    pub async fn mark_readable_with(&self, digest: &str, credentials: &str) {
        self.mark("readable", digest, credentials).await
    }

    async fn is_marked(&self, kind: &str, digest: &str, by: &str) -> bool {
        match self.mark_path(kind, digest, by) {
            Some(path) => tokio::fs::try_exists(path).await.unwrap_or(false),
            None => false,
        }
    }

    async fn mark(&self, kind: &str, digest: &str, by: &str) {
        if let Some(path) = self.mark_path(kind, digest, by) {
            let _ = write_atomically(&path, b"").await;
        }
    }

    /// `<kind>/sha256/<manifest hex>/<hex of by>`: a key or credentials by a whole
    /// digest only.
    fn mark_path(&self, kind: &str, digest: &str, by: &str) -> Option<PathBuf> {
        let base = self.path(kind, digest)?;
        let by = by.strip_prefix("sha256:").filter(|_| is_sha256(by))?;
        Some(base.join(by))
    }

    /// Removes what writes interrupted by a crash left in the store (`*.tmp-<pid>`,
    /// never renamed into place): they would otherwise stay, uncounted by the
    /// store's bound, for the life of its volume. Called when the store is opened.
    pub fn remove_leftovers(&self) {
        let leftover = |name: &str| name.contains(".tmp-");
        for kind in ["layers", "manifests"] {
            let dir = self.dir.join(kind).join("sha256");
            disk_bound::remove_leftovers(&dir, leftover, "store of pulled plugins");
        }
        for kind in ["verified", "readable"] {
            let marks = self.dir.join(kind).join("sha256");
            for entry in std::fs::read_dir(marks).into_iter().flatten().flatten() {
                disk_bound::remove_leftovers(&entry.path(), leftover, "store of pulled plugins");
            }
        }
    }

    /// The component of manifest `digest`, if kept and intact.
    async fn cached(&self, digest: &str) -> Option<Vec<u8>> {
        let manifest = self.path("manifests", digest)?;
        let layer = tokio::fs::read_to_string(manifest).await.ok()?;
        let path = self.path("layers", layer.trim())?;
        let bytes = tokio::fs::read(&path).await.ok()?;
        let intact = sha256_of(&bytes) == layer.trim();
        if intact {
            disk_bound::touch(&path);
        }
        intact.then_some(bytes)
    }

    /// Keeps `bytes` as the component of manifest `digest`.
    async fn keep(&self, digest: &str, bytes: &[u8]) -> std::io::Result<()> {
        let layer = sha256_of(bytes);
        let invalid = || std::io::Error::other(format!("{digest} is not a sha256 digest"));
        let path = self.path("layers", &layer).ok_or_else(invalid)?;
        write_atomically(&path, bytes).await?;
        let manifest = self.path("manifests", digest).ok_or_else(invalid)?;
        write_atomically(&manifest, layer.as_bytes()).await?;
        self.prune(&path);
        Ok(())
    }

    /// Removes the least recently used layers (never `kept`, just written) until the
    /// rest hold at most the bound.
    fn prune(&self, kept: &Path) {
        let Some(layers) = kept.parent() else {
            return;
        };
        // Another process's interrupted write first; this one's may be in flight.
        let ours = format!(".tmp-{}", std::process::id());
        let rank = |name: &str| match name.contains(".tmp-") {
            true => (!name.ends_with(&ours)).then_some(0),
            false => Some(1),
        };
        disk_bound::keep_within(
            layers,
            rank,
            self.max_bytes,
            kept,
            "store of pulled plugins",
        );
    }

    /// `<dir>/<kind>/sha256/<hex>` for a well-formed sha256 digest only, so no digest
    /// can name a path outside the store.
    fn path(&self, kind: &str, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        let well_formed = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        well_formed.then(|| self.dir.join(kind).join("sha256").join(hex))
    }
}

/// `sha256:<hex>` of `bytes`.
fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::sha256::hex_of(bytes))
}

async fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    tokio::fs::write(&temporary, bytes).await?;
    tokio::fs::rename(&temporary, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    #[tokio::test]
    async fn a_kept_plugin_is_found_by_its_manifest_digest_only_while_intact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PulledPlugins::new(dir.path());
        store.keep(DIGEST, b"component").await.expect("kept");
        assert_eq!(
            store.cached(DIGEST).await.as_deref(),
            Some(&b"component"[..])
        );
        let layer = store
            .path("layers", &sha256_of(b"component"))
            .expect("path");
        std::fs::write(layer, b"tampered").expect("write");
        assert_eq!(
            store.cached(DIGEST).await,
            None,
            "a changed file is not taken"
        );
    }

    #[tokio::test]
    async fn past_its_bound_the_store_keeps_the_newest_and_pulls_the_rest_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PulledPlugins::new(dir.path()).with_max_bytes(12);
        let other = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
        store.keep(DIGEST, b"component").await.expect("kept");
        store.keep(other, b"component-2").await.expect("kept");
        assert_eq!(store.cached(DIGEST).await, None, "the older layer went");
        assert_eq!(
            store.cached(other).await.as_deref(),
            Some(&b"component-2"[..])
        );
    }

    #[test]
    fn only_a_well_formed_digest_names_a_path() {
        let store = PulledPlugins::new(Path::new("/cache"));
        assert!(store.path("layers", "sha256:../../etc/passwd").is_none());
        assert!(store.path("layers", "md5:abc").is_none());
        assert_eq!(
            store.path("layers", DIGEST),
            Some(PathBuf::from(format!(
                "/cache/layers/sha256/{}",
                &DIGEST[7..]
            )))
        );
    }

    #[tokio::test]
    async fn interrupted_writes_are_removed_at_open_and_counted_by_the_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PulledPlugins::new(dir.path()).with_max_bytes(12);
        let layers = dir.path().join("layers/sha256");
        std::fs::create_dir_all(&layers).expect("dir");
        let left = layers.join("abc.tmp-1");
        std::fs::write(&left, [0u8; 100]).expect("write");
        store.keep(DIGEST, b"component").await.expect("kept");
        assert!(
            !left.exists(),
            "another process's leftover counts, and goes first"
        );
        std::fs::write(&left, [0u8; 100]).expect("write");
        crate::disk_bound::age_past_leftover(&left);
        store.remove_leftovers();
        assert!(!left.exists(), "removed when the store is opened");
        assert_eq!(
            store.cached(DIGEST).await.as_deref(),
            Some(&b"component"[..])
        );
    }

    #[tokio::test]
    async fn a_verification_is_kept_under_the_keys_whole_digest_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PulledPlugins::new(dir.path());
        let key = format!("sha256:{}", "ab".repeat(32));
        store.mark_verified(DIGEST, &key).await;
        assert!(store.is_verified(DIGEST, &key).await);
        let short = format!("sha256:{}", "ab".repeat(8));
        store.mark_verified(DIGEST, &short).await;
        assert!(
            !store.is_verified(DIGEST, &short).await,
            "a short name is no key"
        );
        let other = format!("sha256:{}{}", "ab".repeat(8), "cd".repeat(24));
        assert!(
            !store.is_verified(DIGEST, &other).await,
            "the same start is another key"
        );
    }
}
