//! A push's half of a session: blobs uploaded whole (unless the registry has them),
//! then the manifest put under the session's tag, its digest computed from the bytes
//! sent rather than taken from the answer.

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};

use super::RegistryError;
use super::manifest::{self, Manifest, digest_of};
use super::session::{Session, content_type};

impl Session<'_> {
    /// Uploads `bytes` as blob `digest` (monolithically), unless the registry has it.
    pub async fn upload(&mut self, digest: &str, bytes: Vec<u8>) -> Result<(), RegistryError> {
        let head = self.url(&format!("blobs/{digest}"))?;
        let exists = self
            .request(Method::HEAD, head, HeaderMap::new(), None)
            .await?;
        if exists.status().is_success() {
            return Ok(());
        }
        let start = self.url("blobs/uploads/")?;
        let started = self
            .request(Method::POST, start.clone(), HeaderMap::new(), None)
            .await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(self.refused(started).await);
        }
        let location = started.headers().get(reqwest::header::LOCATION);
        let location = location.and_then(|l| l.to_str().ok()).unwrap_or_default();
        let mut url = start
            .join(location)
            .map_err(|e| self.error(format!("an upload address: {e}")))?;
        url.query_pairs_mut().append_pair("digest", digest);
        let headers = content_type("application/octet-stream");
        let put = self
            .request(Method::PUT, url, headers, Some(bytes.into()))
            .await?;
        match put.status().is_success() {
            true => Ok(()),
            false => Err(self.refused(put).await),
        }
    }

    /// Puts `manifest` under this session's tag; returns its digest.
    pub async fn put_manifest(&mut self, manifest: &Manifest) -> Result<String, RegistryError> {
        let tag = self.tag();
        let bytes = serde_json::to_vec(manifest).unwrap_or_default();
        let digest = digest_of(&bytes);
        let url = self.url(&format!("manifests/{tag}"))?;
        let headers = content_type(manifest::OCI_MANIFEST);
        let put = self
            .request(Method::PUT, url, headers, Some(bytes.into()))
            .await?;
        match put.status().is_success() {
            true => Ok(digest),
            false => Err(self.refused(put).await),
        }
    }
}
