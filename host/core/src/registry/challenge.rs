//! How a registry asks for credentials: the `WWW-Authenticate` header of a 401, read as
//! RFC 7235 writes it (`Basic realm="..."`, or `Bearer realm="...",service="...",
//! scope="..."` of the Docker token protocol that distribution, Harbor, GHCR and the
//! cloud registries speak), and the token reply of a Bearer realm.
//!
//! Both are a server's text: the header is read only up to a bound and a realm is
//! used only if the transport may visit it (https, or a registry named plain http).

use serde::Deserialize;

/// Longest `WWW-Authenticate` header read.
const MAX_HEADER_BYTES: usize = 8 << 10;

/// What a registry asks a client to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Challenge {
    /// Send the credentials as HTTP Basic.
    Basic,
    /// Get a token from `realm` and send it as a Bearer.
    Bearer {
        /// Where tokens are handed out.
        realm: String,
        /// The `service` parameter to ask for.
        service: Option<String>,
        /// The `scope` the registry says the request needs.
        scope: Option<String>,
    },
}

/// The first challenge of `header` this client answers, if any.
pub(super) fn parse(header: &str) -> Option<Challenge> {
    if header.len() > MAX_HEADER_BYTES {
        return None;
    }
    let (scheme, rest) = header
        .trim()
        .split_once(char::is_whitespace)
        .unwrap_or((header, ""));
    let params = parameters(rest);
    let get = |name: &str| {
        (params.iter())
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
        scope: get("scope"),
    })
}

/// The `name=value` and `name="quoted value"` parameters of a challenge.
fn parameters(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let name: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ',')).collect();
        if chars.next_if_eq(&'=').is_none() {
            return found;
        }
        let value = match chars.next_if_eq(&'"') {
            Some(_) => quoted(&mut chars),
            None => std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect(),
        };
        found.push((name.trim().to_string(), value.trim().to_string()));
    }
}

/// The rest of a quoted string, its `\` escapes undone.
fn quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut value = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => value.extend(chars.next()),
            c => value.push(c),
        }
    }
    value
}

/// A token realm's reply.
#[derive(Debug, Deserialize)]
struct TokenReply {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// The token of a realm's reply, if it holds one.
pub(super) fn token_of(reply: &[u8]) -> Option<String> {
    let reply: TokenReply = serde_json::from_slice(reply).ok()?;
    reply.token.or(reply.access_token).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_gives_its_realm_service_and_scope() {
        let header = r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#;
        assert_eq!(
            parse(header),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull".into()),
            })
        );
        let bare = "bearer realm=https://auth.example/token, scope=\"a,b\"";
        assert_eq!(
            parse(bare),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: None,
                scope: Some("a,b".into()),
            })
        );
    }

    #[test]
    fn basic_is_read_and_anything_else_is_not_answered() {
        assert_eq!(
            parse(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse("Negotiate"), None);
        assert_eq!(parse("Bearer service=\"x\""), None, "no realm");
        assert_eq!(
            parse(&format!("Bearer realm=\"{}\"", "a".repeat(9000))),
            None
        );
        assert_eq!(parse(""), None);
        assert_eq!(
            parse("Bearer realm=\"unterminated"),
            Some(Challenge::Bearer {
                realm: "unterminated".into(),
                service: None,
                scope: None,
            })
        );
    }

    #[test]
    fn a_token_reply_gives_token_or_access_token() {
        assert_eq!(token_of(br#"{"token": "t1"}"#).as_deref(), Some("t1"));
        assert_eq!(
            token_of(br#"{"access_token": "t2"}"#).as_deref(),
            Some("t2")
        );
        assert_eq!(token_of(br#"{"token": ""}"#), None);
        assert_eq!(token_of(b"<html>"), None);
    }
}
