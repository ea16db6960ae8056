//! One pull or push: one repository of one registry, spoken to with one set of
//! credentials, within one deadline.
//!
//! A session answers the registry's challenge with its own credentials and keeps the
//! token it got for itself alone: nothing is cached per registry across sessions, so a
//! `WasmPlugin` pulls with its own pull Secret as that Secret is now, never with
//! credentials another `WasmPlugin` (or an earlier, anonymous pull) left behind.
//! Tokens live minutes and a pull is one manifest and one blob, so a token request
//! per pull costs little; cloud registries' short-lived credentials are read afresh.

use base64::Engine;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode, Url};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::{Instant, timeout_at};

use super::challenge::{self, Challenge};
use super::http::{HttpError, Outgoing, Transport, authority, read_body};
use super::limits::RegistryLimits;
use super::manifest::{self, Descriptor, Manifest, digest_of, is_sha256};
use super::refusal::Refusal;
use super::{Reference, RegistryAuth, RegistryError};

/// What a session may do in its repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read manifests and blobs.
    Pull,
    /// Read and write them.
    Push,
}

/// The shared parts a session draws on.
pub(super) struct Parts<'r> {
    pub transport: &'r Transport,
    pub limits: &'r RegistryLimits,
    /// Bytes of components in flight, in KiB.
    pub memory: &'r Semaphore,
}

/// One pull or push.
pub struct Session<'r> {
    parts: Parts<'r>,
    reference: Reference,
    host: String,
    root: Url,
    credentials: RegistryAuth,
    scope: String,
    deadline: Instant,
    /// What the registry's challenge asked for, once answered: this session's only.
    authorization: Option<HeaderValue>,
    /// This session's turn among the pulls in flight.
    _turn: SemaphorePermit<'r>,
}

impl<'r> Session<'r> {
    /// A session for `reference`'s repository with `credentials`, once `turns` gives
    /// it a turn (waiting counts against its deadline).
    pub(super) async fn open(
        parts: Parts<'r>,
        turns: &'r Semaphore,
        reference: &Reference,
        credentials: RegistryAuth,
        access: Access,
    ) -> Result<Session<'r>, RegistryError> {
        let deadline = Instant::now() + parts.limits.pull_timeout;
        let timed_out = || RegistryError::TimedOut {
            reference: reference.to_string(),
            timeout: parts.limits.pull_timeout,
        };
        let turn = timeout_at(deadline, turns.acquire())
            .await
            .map_err(|_| timed_out())?;
        let turn = turn.map_err(|_| timed_out())?;
        let host = reference.resolve_registry().to_string();
        let root = (parts.transport.root(&host)).map_err(|e| failed(reference, parts.limits, e))?;
        let verbs = match access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        Ok(Session {
            scope: format!("repository:{}:{verbs}", reference.repository()),
            reference: reference.clone(),
            parts,
            host,
            root,
            credentials,
            deadline,
            authorization: None,
            _turn: turn,
        })
    }

    /// The URL of `path` under the repository (`manifests/v1`, `blobs/sha256:...`).
    pub(super) fn url(&self, path: &str) -> Result<Url, RegistryError> {
        let joined = format!("{}/{path}", self.reference.repository());
        (self.root.join(&joined)).map_err(|e| self.error(format!("no URL for {path}: {e}")))
    }

    /// The tag this session's reference names (`latest` if none).
    pub(super) fn tag(&self) -> String {
        self.reference.tag().unwrap_or("latest").to_string()
    }

    pub(super) fn error(&self, why: String) -> RegistryError {
        RegistryError::Registry {
            reference: self.reference.to_string(),
            why,
        }
    }

    fn failed(&self, e: HttpError) -> RegistryError {
        failed(&self.reference, self.parts.limits, e)
    }

    /// Sends a request; a 401 is answered once with this session's credentials.
    pub(super) async fn request(
        &mut self,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Option<bytes::Bytes>,
    ) -> Result<Response, RegistryError> {
        let outgoing = |authorization: &Option<HeaderValue>| Outgoing {
            method: method.clone(),
            url: url.clone(),
            headers: headers.clone(),
            body: body.clone(),
            authorization: authorization.clone().map(|a| (self.host.clone(), a)),
        };
        let first = outgoing(&self.authorization);
        let transport = self.parts.transport;
        let response = transport.send(first, self.deadline).await;
        let response = response.map_err(|e| self.failed(e))?;
        if response.status() != StatusCode::UNAUTHORIZED || self.authorization.is_some() {
            return Ok(response);
        }
        let header = response.headers().get(WWW_AUTHENTICATE);
        let challenge = header
            .and_then(|h| h.to_str().ok())
            .and_then(challenge::parse);
        let Some(authorization) = self.answer(challenge).await? else {
            return Ok(response);
        };
        self.authorization = Some(authorization);
        let again = outgoing(&self.authorization);
        let response = transport.send(again, self.deadline).await;
        response.map_err(|e| self.failed(e))
    }

    /// The `Authorization` that answers `challenge` with this session's credentials;
    /// none when it cannot be answered (the 401 then stands).
    async fn answer(
        &self,
        challenge: Option<Challenge>,
    ) -> Result<Option<HeaderValue>, RegistryError> {
        let header = |text: String| HeaderValue::from_str(&text).ok();
        match (challenge, &self.credentials) {
            (None, _) | (Some(Challenge::Basic), RegistryAuth::Anonymous) => Ok(None),
            (Some(Challenge::Basic), RegistryAuth::Basic(user, password)) => {
                Ok(header(format!("Basic {}", basic(user, password))))
            }
            (Some(_), RegistryAuth::Bearer(token)) => Ok(header(format!("Bearer {token}"))),
            (
                Some(Challenge::Bearer {
                    realm,
                    service,
                    scope,
                }),
                _,
            ) => {
                let token = self.token(&realm, service, scope).await?;
                Ok(header(format!("Bearer {token}")))
            }
        }
    }

    /// A token from `realm` for this session's scope (or the one the registry named).
    async fn token(
        &self,
        realm: &str,
        service: Option<String>,
        scope: Option<String>,
    ) -> Result<String, RegistryError> {
        let mut url = Url::parse(realm).map_err(|e| {
            self.error(format!(
                "a token realm {} that is no URL: {e}",
                super::http::shown(realm)
            ))
        })?;
        if let Err(HttpError::Redirect(why)) = self.parts.transport.may_visit(&url) {
            return Err(self.error(format!("the registry's token realm is refused: {why}")));
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = &service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", scope.as_deref().unwrap_or(&self.scope));
        }
        let authorization = match &self.credentials {
            RegistryAuth::Basic(user, password) => {
                HeaderValue::from_str(&format!("Basic {}", basic(user, password))).ok()
            }
            _ => None,
        };
        let outgoing = Outgoing {
            method: Method::GET,
            authorization: authorization.map(|a| (authority(&url), a)),
            url,
            headers: HeaderMap::new(),
            body: None,
        };
        let response = self.parts.transport.send(outgoing, self.deadline).await;
        let response = response.map_err(|e| self.failed(e))?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        let bound = self.parts.limits.max_small_answer_bytes;
        let reply = read_body(response, "token reply", bound, self.deadline).await;
        let reply = reply.map_err(|e| self.failed(e))?;
        challenge::token_of(&reply)
            .ok_or_else(|| self.error("the token realm's reply holds no token".into()))
    }

    /// The error a non-2xx answer stands for: its status and the registry's error
    /// codes and messages (a bounded read of the body), never the body itself.
    pub(super) async fn refused(&self, response: Response) -> RegistryError {
        let status = response.status().as_u16();
        let bound = self.parts.limits.max_small_answer_bytes;
        let body = read_body(response, "error body", bound, self.deadline).await;
        let refusal = Refusal::of(status, &body.unwrap_or_default());
        let reference = self.reference.to_string();
        match () {
            _ if refusal.is_unauthorized() => RegistryError::Unauthorized {
                reference,
                said: Some(refusal),
            },
            _ if refusal.is_unknown() => RegistryError::NotFound { reference },
            _ => RegistryError::Refused { reference, refusal },
        }
    }

    /// The manifest digest this session's reference names: its own digest, else what
    /// its tag resolves to now. Either way the registry is asked, so the manifest is
    /// known to be there and readable with this session's credentials.
    pub async fn resolve(&mut self) -> Result<String, RegistryError> {
        let named = self.reference.digest().or(self.reference.tag());
        let named = named.unwrap_or("latest").to_string();
        let url = self.url(&format!("manifests/{named}"))?;
        let response = self
            .request(Method::HEAD, url, accept_manifests(), None)
            .await?;
        let said = response.headers().get("docker-content-digest");
        let said = said.and_then(|d| d.to_str().ok()).filter(|d| is_sha256(d));
        // A digest asked for is the answer (the manifest's bytes are checked against
        // it when pulled); a tag's is what the registry says.
        let digest = self.reference.digest().or(said).map(str::to_string);
        match (response.status().is_success(), digest) {
            (true, Some(digest)) => Ok(digest),
            // No usable digest header, or a refusal whose reason a HEAD cannot carry:
            // the manifest itself says (or the refusal's body says why).
            _ => Ok(self.manifest(&named).await?.1),
        }
    }

    /// The manifest `tag_or_digest` names in this repository, and its digest (of the
    /// bytes read, checked against a digest asked for).
    pub async fn manifest(
        &mut self,
        tag_or_digest: &str,
    ) -> Result<(Manifest, String), RegistryError> {
        let url = self.url(&format!("manifests/{tag_or_digest}"))?;
        let response = self
            .request(Method::GET, url, accept_manifests(), None)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        let bound = self.parts.limits.max_manifest_bytes;
        let bytes = read_body(response, "manifest", bound, self.deadline).await;
        let bytes = bytes.map_err(|e| self.failed(e))?;
        let digest = digest_of(&bytes);
        if is_sha256(tag_or_digest) && digest != tag_or_digest {
            return Err(self.error(format!(
                "the manifest's digest is {digest}, not {tag_or_digest}"
            )));
        }
        let manifest = Manifest::parse(&bytes).map_err(|why| self.error(why))?;
        Ok((manifest, digest))
    }

    /// The blob `blob` describes, at most `max_bytes`, checked against its digest and
    /// size; the bytes in flight count against the pulls' shared memory bound.
    pub async fn blob(
        &mut self,
        blob: &Descriptor,
        max_bytes: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let reference = self.reference.to_string();
        let too_large = |size| RegistryError::TooLarge {
            reference: reference.clone(),
            size,
            max_bytes,
        };
        if blob.size > max_bytes {
            return Err(too_large(blob.size));
        }
        let _memory = self.memory(blob.size).await?;
        let url = self.url(&format!("blobs/{}", blob.digest))?;
        let response = self
            .request(Method::GET, url, HeaderMap::new(), None)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        let bytes = match read_body(response, "blob", blob.size, self.deadline).await {
            Err(HttpError::TooLarge { .. }) => return Err(too_large(blob.size + 1)),
            read => read.map_err(|e| self.failed(e))?,
        };
        if bytes.len() as u64 != blob.size || digest_of(&bytes) != blob.digest {
            return Err(self.error(format!(
                "the blob {} arrived with another digest or size",
                blob.digest
            )));
        }
        Ok(bytes.to_vec())
    }

    /// A share of the pulls' memory bound for `bytes`, waited for within the deadline.
    async fn memory(&self, bytes: u64) -> Result<SemaphorePermit<'r>, RegistryError> {
        let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
        let total = self.parts.limits.max_pull_memory_bytes;
        if u64::from(kib) * 1024 > total.max(1024) {
            return Err(self.error(format!(
                "a blob of {bytes} bytes is more than the pulls may hold together \
                 ({total} bytes, --registry-max-pull-mib)"
            )));
        }
        let permit = timeout_at(self.deadline, self.parts.memory.acquire_many(kib)).await;
        let permit = permit.map_err(|_| self.failed(HttpError::TimedOut))?;
        permit.map_err(|_| self.failed(HttpError::TimedOut))
    }
}

/// The registry error an exchange's failure is, for `reference`.
fn failed(reference: &Reference, limits: &RegistryLimits, e: HttpError) -> RegistryError {
    let reference = reference.to_string();
    match e {
        HttpError::Transport(why) => RegistryError::Unreachable { reference, why },
        HttpError::TimedOut => RegistryError::TimedOut {
            reference,
            timeout: limits.pull_timeout,
        },
        HttpError::TooLarge { what, bound } => RegistryError::AnswerTooLarge {
            reference,
            what,
            bound,
        },
        HttpError::Redirect(why) => RegistryError::Redirect { reference, why },
    }
}

fn basic(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

fn accept_manifests() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(manifest::ACCEPT));
    headers
}

/// Headers saying the body is of `kind`.
pub(super) fn content_type(kind: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    headers
}
