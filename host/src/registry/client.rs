//! Pushing a plugin to an OCI registry and pulling one from it, in the CNCF Wasm
//! layout, over TLS with the system's roots and any CA the operator adds.
//!
//! A pull is bounded before it is trusted: the manifest must describe one layer of a
//! Wasm media type whose declared size is within the bound, the download stops at the
//! bound whatever the registry sends, and `oci-client` checks the manifest against a
//! pinned reference's digest and every blob against its descriptor's digest.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio::io::AsyncWrite;

use super::RegistryError;
use super::layout::{ACCEPTED_LAYERS, WASM_CONFIG, WASM_LAYER, WasmConfig};
use super::signature::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING};

/// A plugin pulled from a registry.
#[derive(Debug)]
pub struct Pulled {
    /// The manifest's digest (`sha256:...`): what a tag resolved to.
    pub digest: String,
    /// The layer's media type.
    pub media_type: String,
    /// The component.
    pub bytes: Vec<u8>,
}

/// A client for the registries plugins live in.
pub struct Registry {
    client: Client,
}

impl Registry {
    /// A client trusting the system's roots and the PEM certificates in `ca_files`.
    pub fn new(ca_files: &[PathBuf]) -> Result<Registry, RegistryError> {
        // The registry client's TLS takes the process's crypto provider: ring, the one
        // kube's client is built with (an error only says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut extra_root_certificates = Vec::new();
        for path in ca_files {
            let data = std::fs::read(path).map_err(|e| RegistryError::CaFile {
                path: path.clone(),
                why: e.to_string(),
            })?;
            let encoding = CertificateEncoding::Pem;
            extra_root_certificates.push(Certificate { encoding, data });
        }
        let config = ClientConfig {
            extra_root_certificates,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            // A plugin is one image manifest; an index is refused, not resolved.
            platform_resolver: None,
            ..ClientConfig::default()
        };
        Ok(Registry {
            client: Client::new(config),
        })
    }

    /// Pushes `component` to `reference` (a tag) in the CNCF layout; returns the
    /// manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        component: Vec<u8>,
        auth: &RegistryAuth,
    ) -> Result<String, RegistryError> {
        let layer = ImageLayer::new(component, WASM_LAYER.to_string(), None);
        let config = WasmConfig::of(&layer.data, layer.sha256_digest())?;
        let config = Config::new(config.to_bytes(), WASM_CONFIG.to_string(), None);
        let failed = |e| RegistryError::of(reference, e);
        (self.client.push(reference, &[layer], config, auth, None))
            .await
            .map_err(failed)?;
        (self.client.fetch_manifest_digest(reference, auth))
            .await
            .map_err(failed)
    }

    /// The payloads and signatures of the cosign signature artifact at `reference`,
    /// each payload at most 64 KiB.
    pub async fn signatures(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Vec<(Vec<u8>, String)>, RegistryError> {
        let failed = |e| RegistryError::of(reference, e);
        let (manifest, _) = (self.client.pull_image_manifest(reference, auth))
            .await
            .map_err(failed)?;
        let mut found = Vec::new();
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING)
        {
            let annotations = layer.annotations.as_ref();
            let Some(signature) = annotations.and_then(|a| a.get(SIGNATURE_ANNOTATION)) else {
                continue;
            };
            let mut sink = BoundedSink::new(64 << 10);
            (self.client.pull_blob(reference, layer, &mut sink))
                .await
                .map_err(failed)?;
            found.push((sink.bytes, signature.clone()));
        }
        Ok(found)
    }

    /// The manifest digest `reference` (a tag) names now.
    pub async fn resolve(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<String, RegistryError> {
        (self.client.fetch_manifest_digest(reference, auth))
            .await
            .map_err(|e| RegistryError::of(reference, e))
    }

    /// Pulls the component at `reference`, refusing one over `max_bytes`.
    pub async fn pull(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        max_bytes: u64,
    ) -> Result<Pulled, RegistryError> {
        let failed = |e| RegistryError::of(reference, e);
        let (manifest, digest) = (self.client.pull_image_manifest(reference, auth))
            .await
            .map_err(failed)?;
        let [layer] = manifest.layers.as_slice() else {
            let layers = manifest.layers.len();
            return Err(RegistryError::Layers {
                reference: reference.to_string(),
                layers,
            });
        };
        if !ACCEPTED_LAYERS.contains(&layer.media_type.as_str()) {
            let media_type = layer.media_type.clone();
            return Err(RegistryError::MediaType {
                reference: reference.to_string(),
                media_type,
            });
        }
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        let too_large = |size| RegistryError::TooLarge {
            reference: reference.to_string(),
            size,
            max_bytes,
        };
        if declared > max_bytes {
            return Err(too_large(declared));
        }
        let mut sink = BoundedSink::new(max_bytes);
        let pulled = self.client.pull_blob(reference, layer, &mut sink).await;
        if sink.overflowed {
            return Err(too_large(sink.written));
        }
        pulled.map_err(failed)?;
        Ok(Pulled {
            digest,
            media_type: layer.media_type.clone(),
            bytes: sink.bytes,
        })
    }
}

/// Collects a download, failing the write that would take it past its bound.
struct BoundedSink {
    bytes: Vec<u8>,
    max_bytes: u64,
    written: u64,
    overflowed: bool,
}

impl BoundedSink {
    fn new(max_bytes: u64) -> BoundedSink {
        BoundedSink {
            bytes: Vec::new(),
            max_bytes,
            written: 0,
            overflowed: false,
        }
    }
}

impl AsyncWrite for BoundedSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written += buf.len() as u64;
        if self.written > self.max_bytes {
            self.overflowed = true;
            return Poll::Ready(Err(io::Error::other("over the plugin size bound")));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn a_download_stops_at_its_bound() {
        let mut sink = BoundedSink::new(4);
        sink.write_all(b"abcd").await.expect("within the bound");
        assert!(sink.write_all(b"e").await.is_err());
        assert!(sink.overflowed);
        assert_eq!(sink.written, 5);
        assert_eq!(sink.bytes, b"abcd");
    }
}
