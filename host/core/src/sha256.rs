//! SHA-256 as the host writes it: lower-case hex. One place for the content hash of a
//! plugin, the digest of a pulled blob, a key's fingerprint and a stable name.

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, lower-case hex.
pub fn hex_of(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hash_of_nothing_is_the_well_known_one() {
        assert_eq!(
            super::hex_of(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
