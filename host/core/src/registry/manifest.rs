//! An image manifest as a registry sends it (OCI, or Docker's v2 schema 2 that older
//! registries answer with), read from bytes already bounded: the fields a plugin's
//! pull needs, and every digest checked to be a well-formed `sha256:` before it names
//! a URL or a file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The OCI image manifest's media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker's image manifest's media type (v2, schema 2).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// What a pull accepts, in order.
pub const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
                          application/vnd.docker.distribution.manifest.v2+json";

/// One blob a manifest names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Its size in bytes, as the manifest declares it.
    pub size: u64,
    /// Annotations (a cosign signature's is on its layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest's own media type, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers, in order.
    pub layers: Vec<Descriptor>,
}

impl Manifest {
    /// Reads `bytes` as a manifest; why not, in a few words.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            let (text, _) = crate::logs::escape_cut(&e.to_string(), 200);
            format!("not an image manifest: {text}")
        })?;
        if let Some(kind) = &manifest.media_type
            && kind != OCI_MANIFEST
            && kind != DOCKER_MANIFEST
        {
            let kind = crate::logs::escape_cut(kind, 120).0;
            return Err(format!(
                "a {kind}, not an image manifest (an index is not resolved)"
            ));
        }
        let blobs = std::iter::once(&manifest.config).chain(&manifest.layers);
        for blob in blobs {
            if !is_sha256(&blob.digest) {
                let shown = crate::logs::escape_cut(&blob.digest, 80).0;
                return Err(format!(
                    "a blob digest {shown:?} that is not sha256:<64 hex>"
                ));
            }
        }
        Ok(manifest)
    }
}

/// Whether `digest` is `sha256:` and 64 lower-case hex digits.
pub fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::sha256::hex_of(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    fn manifest(media_type: &str, digest: &str) -> String {
        serde_json::json!({"schemaVersion": 2, "mediaType": media_type,
            "config": {"mediaType": "c", "digest": D, "size": 2},
            "layers": [{"mediaType": "application/wasm", "digest": digest, "size": 3}]})
        .to_string()
    }

    #[test]
    fn a_manifest_with_well_formed_digests_is_read() {
        let read = Manifest::parse(manifest(OCI_MANIFEST, D).as_bytes()).expect("a manifest");
        assert_eq!(read.layers[0].size, 3);
        assert_eq!(read.layers[0].digest, D);
    }

    #[test]
    fn an_index_a_hostile_digest_or_a_negative_size_is_refused() {
        let index = "application/vnd.oci.image.index.v1+json";
        let refused = Manifest::parse(manifest(index, D).as_bytes()).expect_err("an index");
        assert!(refused.contains("not an image manifest"), "{refused}");
        let path = Manifest::parse(manifest(OCI_MANIFEST, "sha256:../../v2/x").as_bytes());
        assert!(path.expect_err("a path").contains("not sha256:<64 hex>"));
        let negative = manifest(OCI_MANIFEST, D).replace("\"size\":3", "\"size\":-1");
        assert!(Manifest::parse(negative.as_bytes()).is_err());
        assert!(Manifest::parse(b"[]").is_err());
        assert!(!is_sha256(&D.to_uppercase()));
    }
}
