//! Registry credentials in the Docker config format: the file `docker login`, `oras`
//! and `crane` write (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`) and
//! the `.dockerconfigjson` of a `kubernetes.io/dockerconfigjson` Secret are the same
//! document, so one reader serves the CLI and the host.
//!
//! Entries are matched by registry host (`registry.example:5000`), with or without a
//! scheme or path in the key, as the Docker CLI writes both. Credential helpers
//! (`credsStore`, `credHelpers`) are run for the command line's user
//! (`credential_helper`), never for a pull Secret: an entry of a Secret that needs one
//! is reported as such.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use super::auth::RegistryAuth;

/// Credentials for registries, read from one Docker config document.
#[derive(Debug, Default, Deserialize)]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

/// One registry's entry: `auth` (base64 of `user:password`) or its two halves, or an
/// identity token.
#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

/// Why credentials could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The document is not a Docker config.
    #[error("{what} is not a Docker config: {why}")]
    Malformed {
        /// The file or Secret.
        what: String,
        /// The parser's complaint.
        why: String,
    },
    /// A credential helper gave no credentials.
    #[error("{what}: for {registry}: {why}")]
    Helper {
        /// The file.
        what: String,
        /// The registry's host.
        registry: String,
        /// The helper's failure.
        why: String,
    },
    /// The entry for a registry cannot be used.
    #[error("{what}: the entry for {registry} {why}")]
    Unusable {
        /// The file or Secret.
        what: String,
        /// The registry's host.
        registry: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl DockerConfig {
    /// Parses `json`, which `what` names in errors.
    pub fn parse(json: &[u8], what: &str) -> Result<DockerConfig, CredentialsError> {
        serde_json::from_slice(json).map_err(|e| CredentialsError::Malformed {
            what: what.to_string(),
            why: e.to_string(),
        })
    }

    /// The user's own file, as `docker login` writes it; none (every registry
    /// anonymous) if there is no such file.
    pub fn of_user() -> Result<DockerConfig, CredentialsError> {
        let file = user_config_path().and_then(|path| Some((std::fs::read(&path).ok()?, path)));
        match file {
            Some((json, path)) => Self::parse(&json, &path.display().to_string()),
            None => Ok(DockerConfig::default()),
        }
    }

    /// How the command line's user authenticates to `registry`, as docker does: the
    /// credential helper `credHelpers` names for it, else the `credsStore`, else the
    /// file's own entry (anonymous without one). Only for the user's own file: a
    /// program named in a pull Secret is never run (see [`DockerConfig::auth_for`]).
    pub fn auth_for_user(
        &self,
        registry: &str,
        what: &str,
    ) -> Result<RegistryAuth, CredentialsError> {
        let helper = (self.cred_helpers.get(registry)).or(self.creds_store.as_ref());
        match helper {
            Some(helper) => super::credential_helper::get(helper, registry).map_err(|e| {
                CredentialsError::Helper {
                    what: what.to_string(),
                    registry: registry.to_string(),
                    why: e.to_string(),
                }
            }),
            None => self.auth_for(registry, what),
        }
    }

    /// How to authenticate to `registry` (a host, with its port if any) from this
    /// document alone: anonymously when there is no entry for it; an entry kept by a
    /// credential helper is refused, naming it, since no program a Secret names is
    /// run.
    pub fn auth_for(&self, registry: &str, what: &str) -> Result<RegistryAuth, CredentialsError> {
        let unusable = |why| CredentialsError::Unusable {
            what: what.to_string(),
            registry: registry.to_string(),
            why,
        };
        let entry = self.auths.iter().find(|(key, _)| host_of(key) == registry);
        let Some((_, entry)) = entry else {
            let helper = self.cred_helpers.contains_key(registry) || self.creds_store.is_some();
            return match helper {
                true => Err(unusable(
                    "is kept by a credential helper, which the host does not run for a pull \
                     Secret (give the credentials inline: `kubectl create secret \
                     docker-registry`)",
                )),
                false => Ok(RegistryAuth::Anonymous),
            };
        };
        if let Some(token) = &entry.identity_token {
            return Ok(RegistryAuth::Bearer(token.clone()));
        }
        if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        let encoded = entry
            .auth
            .as_deref()
            .ok_or_else(|| unusable("has no credentials"))?;
        let decoded = (base64::engine::general_purpose::STANDARD.decode(encoded.trim()))
            .map_err(|_| unusable("has an `auth` that is not base64"))?;
        let text =
            String::from_utf8(decoded).map_err(|_| unusable("has an `auth` that is not text"))?;
        let (user, password) = (text.split_once(':'))
            .ok_or_else(|| unusable("has an `auth` without `user:password`"))?;
        Ok(RegistryAuth::Basic(user.to_string(), password.to_string()))
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn user_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(Path::new(&dir).join("config.json"));
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".docker").join("config.json"))
}

/// The host of a Docker config key: `https://r.example:5000/v1/` → `r.example:5000`.
fn host_of(key: &str) -> &str {
    let key = key.split_once("://").map_or(key, |(_, rest)| rest);
    key.split('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> DockerConfig {
        DockerConfig::parse(json.as_bytes(), "test").expect("a Docker config")
    }

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(user, password) => (user, password),
            other => panic!("expected basic auth, got {other:?}"),
        }
    }

    #[test]
    fn an_entry_is_found_by_host_whatever_the_key_carries() {
        // base64("wcm:s3cret")
        let c =
            config(r#"{"auths": {"https://r.example:5000/v1/": {"auth": "d2NtOnMzY3JldA=="}}}"#);
        let found = basic(c.auth_for("r.example:5000", "test").expect("usable"));
        assert_eq!(found, ("wcm".into(), "s3cret".into()));
        let halves = config(r#"{"auths": {"r.example": {"username": "u", "password": "p"}}}"#);
        assert_eq!(
            basic(halves.auth_for("r.example", "t").expect("usable")),
            ("u".into(), "p".into())
        );
    }

    #[test]
    fn no_entry_is_anonymous_and_a_secrets_helper_is_never_run() {
        let none = config(r#"{"auths": {"other.example": {"auth": "dTpw"}}}"#);
        assert!(matches!(
            none.auth_for("r.example", "t"),
            Ok(RegistryAuth::Anonymous)
        ));
        let helper = config(r#"{"credHelpers": {"r.example": "ecr-login"}}"#);
        let refused = helper
            .auth_for("r.example", "pull Secret wcm/pull")
            .expect_err("helper");
        assert!(
            refused.to_string().starts_with(
                "pull Secret wcm/pull: the entry for r.example is kept by a credential helper, \
                 which the host does not run for a pull Secret"
            ),
            "{refused}"
        );
    }

    #[test]
    fn the_users_helper_is_run_for_its_registry_only() {
        let helper = config(
            r#"{"credHelpers": {"r.example": "wcm-missing"},
            "auths": {"other.example": {"auth": "dTpw"}}}"#,
        );
        let ran = helper.auth_for_user("r.example", "~/.docker/config.json");
        let said = ran.expect_err("no such helper").to_string();
        assert!(said.contains("docker-credential-wcm-missing"), "{said}");
        let inline = helper.auth_for_user("other.example", "~/.docker/config.json");
        assert_eq!(basic(inline.expect("inline")), ("u".into(), "p".into()));
    }

    #[test]
    fn a_broken_entry_says_what_is_wrong() {
        let c = config(r#"{"auths": {"r.example": {"auth": "not base64!"}}}"#);
        let refused = c
            .auth_for("r.example", "Secret wcm/pull")
            .expect_err("broken");
        assert!(refused.to_string().contains("is not base64"), "{refused}");
        let malformed =
            DockerConfig::parse(br#"{"auths": 3}"#, "Secret wcm/pull").expect_err("not an object");
        assert!(
            malformed
                .to_string()
                .starts_with("Secret wcm/pull is not a Docker config")
        );
    }
}
