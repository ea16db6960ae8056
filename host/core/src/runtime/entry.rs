//! One compile-cache entry on disk: the serialised artifact, then its SHA-256 and a
//! magic line. The artifact comes first so wasmtime can map the file as it is
//! (`deserialize_file`, page-aligned); the digest is checked by reading the file a
//! chunk at a time before wasmtime sees it, and wasmtime then checks its own header.
//! The compile worker writes its output in this form, the cache keeps it, and the
//! worker's store of compiled functions (`super::functions`) wraps each function so.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Last bytes of every entry; bump the digit when the layout changes (entries of the
/// first layout, with the magic and digest in front, are refused as foreign and
/// compiled again).
const MAGIC: &[u8; 8] = b"WCMART2\n";
const DIGEST_LEN: usize = 32;
/// The digest and the magic after the artifact.
pub(super) const TRAILER: usize = DIGEST_LEN + MAGIC.len();
/// Bytes read at a time while checking an entry's digest.
const CHUNK: usize = 256 << 10;

/// Why a cache entry was not used (it is then recompiled and rewritten).
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// The file is shorter than its header or does not start with our magic.
    #[error("not a cache entry of this host")]
    Foreign,
    /// The stored digest does not match the content.
    #[error("corrupted: content digest mismatch")]
    Corrupted,
    /// The entry is larger than what wrote it could have written.
    #[error("{len} bytes, more than the {max} its writer is bounded to")]
    TooLarge {
        /// Its size.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Unreadable(#[from] std::io::Error),
    /// wasmtime refused the artifact (another version or engine configuration).
    #[error("rejected by wasmtime: {0}")]
    Incompatible(String),
}

/// Writes an entry: the artifact, its SHA-256, the magic line. The compile worker
/// writes its output so, and the daemon reads it as it reads the cache.
pub fn write_entry(out: &mut impl std::io::Write, payload: &[u8]) -> std::io::Result<()> {
    out.write_all(payload)?;
    out.write_all(&Sha256::digest(payload))?;
    out.write_all(MAGIC)?;
    out.flush()
}

/// The component of the entry at `path` (at most `max_bytes`), mapped from the file
/// once its magic and digest are checked.
pub fn load_entry(engine: &Engine, path: &Path, max_bytes: u64) -> Result<Component, EntryError> {
    verify(path, max_bytes)?;
    map(engine, path)
}

/// The length of the contents of an entry held in memory (`bytes` without its
/// trailer), if its magic and digest are right.
pub fn verified_len(bytes: &[u8]) -> Option<usize> {
    let len = bytes.len().checked_sub(TRAILER)?;
    let (payload, trailer) = bytes.split_at(len);
    let (digest, magic) = trailer.split_at(DIGEST_LEN);
    (magic == MAGIC && Sha256::digest(payload).as_slice() == digest).then_some(len)
}

/// Checks the entry's size, magic and digest, reading it a chunk at a time: the
/// artifact is never held in the heap.
fn verify(path: &Path, max_bytes: u64) -> Result<(), EntryError> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > max_bytes {
        return Err(EntryError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    let Some(payload_len) = len.checked_sub(TRAILER as u64) else {
        return Err(EntryError::Foreign);
    };
    let mut trailer = [0; TRAILER];
    file.seek(SeekFrom::Start(payload_len))?;
    file.read_exact(&mut trailer)?;
    let (digest, magic) = trailer.split_at(DIGEST_LEN);
    if magic != MAGIC {
        return Err(EntryError::Foreign);
    }
    file.rewind()?;
    let mut payload = file.take(payload_len);
    let (mut hasher, mut chunk) = (Sha256::new(), vec![0; CHUNK]);
    loop {
        match payload.read(&mut chunk)? {
            0 => break,
            n => hasher.update(&chunk[..n]),
        }
    }
    match hasher.finalize().as_slice() == digest {
        true => Ok(()),
        false => Err(EntryError::Corrupted),
    }
}

/// Maps a verified entry as a component.
#[allow(unsafe_code)]
fn map(engine: &Engine, path: &Path) -> Result<Component, EntryError> {
    // SAFETY: wasmtime requires the file to hold an artifact it produced itself, and
    // to stay unchanged while mapped. It holds one: this host wrote the entry
    // (`try_write`, from `Component::serialize`), or its own compile worker did
    // (`runtime::worker`, the host's binary run as a child into a file the host
    // created), in a directory it owns, and the SHA-256 stored with it has just been
    // checked, so accidental corruption is caught before this point (the trailer after
    // the artifact is outside every section wasmtime reads). Entries are only ever
    // replaced by a rename and removed by an unlink, both of which leave a mapping of
    // the old file intact; none is rewritten in place. wasmtime also checks its own
    // header and refuses artifacts of another version or engine configuration.
    unsafe { Component::deserialize_file(engine, path) }
        .map_err(|e| EntryError::Incompatible(super::chain(&e)))
}
