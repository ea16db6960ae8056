//! Signatures over a plugin's manifest digest in cosign's format, checked against a
//! public key before anything is compiled.
//!
//! `cosign sign --key` stores a signature as an artifact tagged `sha256-<hex>.sig` in
//! the plugin's repository: each layer (`application/vnd.dev.cosign.simplesigning.v1+json`)
//! is a "simple signing" payload naming the signed manifest digest, and its annotation
//! `dev.cosignproject.cosign/signature` holds the base64 ECDSA P-256 / SHA-256
//! signature over the payload's bytes. A plugin is verified by a key when one layer's
//! signature verifies with the key and its payload names the plugin's digest.
//! Keyless (Fulcio certificates, Rekor entries) is not checked: see docs/deploying.md.

use base64::Engine;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::{DecodePublicKey, EncodePublicKey};
use serde_json::Value;

use super::limits::{MAX_SIGNATURE_BYTES, MAX_SIGNATURES};
use super::{RegistryError, Session};

/// The layer media type of a cosign signature.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// What a plugin without any signature is said to have.
const NONE: &str = ": it has no signature";

/// A public key plugins must be signed by, named by its fingerprint.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    key: VerifyingKey,
    name: String,
    digest: String,
}

/// Why a plugin is not verified by a key; each names the key.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// The key is not an ECDSA P-256 public key in PEM.
    #[error("{what} is not an ECDSA P-256 public key in PEM: {why}")]
    BadKey {
        /// Where the key came from.
        what: String,
        /// The parser's complaint.
        why: String,
    },
    /// No signature artifact, or none of its signatures is by the key.
    #[error("{digest} is not signed by key {key}{found}")]
    NotSigned {
        /// The plugin's manifest digest.
        digest: String,
        /// The key's name.
        key: String,
        /// What was found instead, if anything.
        found: String,
        /// No signature at all was found.
        missing: bool,
    },
    /// The signature artifact could not be read.
    #[error("the signatures of {digest} could not be read: {cause}")]
    Unreadable {
        /// The plugin's manifest digest.
        digest: String,
        /// The registry's error.
        cause: RegistryError,
    },
}

impl SignatureError {
    /// The condition reason an operator reads.
    pub fn reason(&self) -> &'static str {
        match self {
            SignatureError::BadKey { .. } => "InvalidKey",
            SignatureError::NotSigned { missing: true, .. } => "SignatureMissing",
            SignatureError::NotSigned { .. } => "SignatureInvalid",
            SignatureError::Unreadable { .. } => "SignatureUnreadable",
        }
    }
}

impl TrustedKey {
    /// The key in `pem`, which `what` names in errors.
    pub fn from_pem(pem: &str, what: &str) -> Result<TrustedKey, SignatureError> {
        let bad = |why: String| SignatureError::BadKey {
            what: what.to_string(),
            why,
        };
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| bad(e.to_string()))?;
        let der = (key.to_public_key_der()).map_err(|e| bad(e.to_string()))?;
        let hex = crate::sha256::hex_of(der.as_bytes());
        Ok(TrustedKey {
            key,
            name: format!("sha256:{}", &hex[..16]),
            digest: format!("sha256:{hex}"),
        })
    }

    /// The key's name, as errors show it: the start of the SHA-256 of its DER form.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole SHA-256 of its DER form: what a record of a verification is kept
    /// under, so no other key (one sharing the name's 64 bits) can pass for it.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether `signature` (base64 DER) over `payload` is this key's, and the payload
    /// names `digest`.
    fn verifies(&self, payload: &[u8], signature: &str, digest: &str) -> Result<(), String> {
        let der = (base64::engine::general_purpose::STANDARD.decode(signature.trim()))
            .map_err(|_| "a signature that is not base64".to_string())?;
        let signature =
            Signature::from_der(&der).map_err(|_| "a signature that is not ECDSA".to_string())?;
        (self.key.verify(payload, &signature))
            .map_err(|_| "a signature by another key".to_string())?;
        let payload: Value = serde_json::from_slice(payload)
            .map_err(|_| "a payload that is not JSON".to_string())?;
        let signed = payload
            .pointer("/critical/image/docker-manifest-digest")
            .and_then(Value::as_str);
        match signed == Some(digest) {
            true => Ok(()),
            false => Err(format!("a signature of {}", signed.unwrap_or("nothing"))),
        }
    }
}

/// Checks that the plugin of manifest `digest` in `session`'s repository is signed by
/// `key`.
pub async fn verify(
    session: &mut Session<'_>,
    digest: &str,
    key: &TrustedKey,
) -> Result<(), SignatureError> {
    let tag = format!("{}.sig", digest.replace(':', "-"));
    let not_signed = |found: String| SignatureError::NotSigned {
        digest: digest.to_string(),
        key: key.name().to_string(),
        missing: found == NONE,
        found,
    };
    let layers = match signatures(session, &tag).await {
        Ok(layers) => layers,
        Err(RegistryError::NotFound { .. }) => {
            return Err(not_signed(NONE.into()));
        }
        Err(cause) => {
            return Err(SignatureError::Unreadable {
                digest: digest.to_string(),
                cause,
            });
        }
    };
    let mut found = Vec::new();
    for (payload, signature) in layers {
        match key.verifies(&payload, &signature, digest) {
            Ok(()) => return Ok(()),
            Err(why) => found.push(why),
        }
    }
    match found.is_empty() {
        true => Err(not_signed(NONE.into())),
        false => Err(not_signed(format!(": found {}", found.join(", ")))),
    }
}

/// The payloads and signatures of the cosign signature artifact tagged `tag` in
/// `session`'s repository: at most [`MAX_SIGNATURES`], each payload at most 64 KiB.
async fn signatures(
    session: &mut Session<'_>,
    tag: &str,
) -> Result<Vec<(Vec<u8>, String)>, RegistryError> {
    let (manifest, _) = session.manifest(tag).await?;
    let signed = (manifest.layers.iter())
        .filter(|l| l.media_type == SIMPLE_SIGNING && l.size <= MAX_SIGNATURE_BYTES)
        .filter_map(|l| Some((l, l.annotations.as_ref()?.get(SIGNATURE_ANNOTATION)?)))
        .take(MAX_SIGNATURES);
    let mut found = Vec::new();
    for (layer, signature) in signed {
        let payload = session.blob(layer, MAX_SIGNATURE_BYTES).await?;
        found.push((payload, signature.clone()));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer;

    use super::*;

    fn key_pair(seed: u8) -> (SigningKey, TrustedKey) {
        let signing = SigningKey::from_slice(&[seed; 32]).expect("a scalar");
        let pem = signing
            .verifying_key()
            .to_public_key_pem(Default::default())
            .expect("pem");
        (signing, TrustedKey::from_pem(&pem, "test").expect("a key"))
    }

    fn signed(signing: &SigningKey, digest: &str) -> (Vec<u8>, String) {
        let payload = serde_json::json!({"critical": {"identity": {"docker-reference": "r/p"},
            "image": {"docker-manifest-digest": digest}, "type": "cosign container image signature"},
            "optional": null}).to_string().into_bytes();
        let signature: Signature = signing.sign(&payload);
        (
            payload,
            base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes()),
        )
    }

    #[test]
    fn a_signature_verifies_only_by_its_key_and_for_its_digest() {
        let (signing, key) = key_pair(7);
        let (_, other) = key_pair(9);
        let (payload, signature) = signed(&signing, "sha256:aa");
        assert_eq!(key.verifies(&payload, &signature, "sha256:aa"), Ok(()));
        assert_eq!(
            other.verifies(&payload, &signature, "sha256:aa"),
            Err("a signature by another key".into())
        );
        assert_eq!(
            key.verifies(&payload, &signature, "sha256:bb"),
            Err("a signature of sha256:aa".into())
        );
        assert!(
            key.name().starts_with("sha256:") && key.name().len() == 23,
            "{}",
            key.name()
        );
    }

    #[test]
    fn a_key_that_is_not_one_is_refused_naming_where_it_came_from() {
        let refused = TrustedKey::from_pem("not a key", "WasmPlugin a spec.verify.publicKey");
        let refused = refused.expect_err("not PEM").to_string();
        assert!(
            refused
                .starts_with("WasmPlugin a spec.verify.publicKey is not an ECDSA P-256 public key"),
            "{refused}"
        );
    }
}
