//! Another build of a plugin: its bytes with a custom section appended, so it has a
//! content hash of its own while its code is the same. Shared by the tests and the
//! benches (`#[path]`), which need plugins that differ without compiling them again.

/// `bytes` with a custom section appended: another artifact (another digest), the
/// same plugin.
pub fn another_build(bytes: &[u8], note: &str) -> Vec<u8> {
    let mut section = Vec::new();
    let name = b"wcm-test-build";
    leb128(&mut section, name.len());
    section.extend_from_slice(name);
    section.extend_from_slice(note.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0); // custom section
    leb128(&mut out, section.len());
    out.extend(section);
    out
}

/// Unsigned LEB128, the binary format's encoding of sizes.
fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        match n {
            0 => return out.push(byte),
            _ => out.push(byte | 0x80),
        }
    }
}
