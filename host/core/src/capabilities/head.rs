//! What a whole object a plugin passes (`apply`, `create`, `update`) addresses — its
//! `apiVersion`, `kind`, name (or `generateName`) and namespace — read without
//! building the object, so the target is checked and the plugin's verb on it required
//! before the body is parsed into a tree (tens of bytes per element).

use std::borrow::Cow;

use kube::core::GroupVersionKind;
use serde::Deserialize;

use super::{CapabilityError, Target};
use crate::kube::discovery::split_api_version;

/// The fields of an object that say what it is; everything else is skipped unparsed.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<MetaHead<'a>>,
}

#[derive(Deserialize)]
struct MetaHead<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(rename = "generateName", borrow, default)]
    generate_name: Option<Cow<'a, str>>,
}

/// The checked target of the object `json` passed to `call`. With `generate`, a
/// `metadata.generateName` stands for a missing name: it is checked as the names it
/// generates are (a prefix plus a suffix), and the target is named by the prefix.
pub(crate) fn object_head(
    call: &str,
    plugin: &str,
    json: &str,
    generate: bool,
) -> Result<Target, CapabilityError> {
    let invalid = |why: String| CapabilityError::Invalid(format!("{call}: the object {why}"));
    let head: Head =
        serde_json::from_str(json).map_err(|e| invalid(format!("is not JSON: {e}")))?;
    let api_version = head
        .api_version
        .ok_or_else(|| invalid("has no apiVersion".into()))?;
    let kind = head.kind.ok_or_else(|| invalid("has no kind".into()))?;
    let meta = head.metadata;
    let (name, namespace, generated) = match meta {
        Some(m) => (m.name, m.namespace, m.generate_name),
        None => (None, None, None),
    };
    let prefix = match (generate, &name, generated) {
        (true, None, Some(prefix)) => Some(prefix.into_owned()),
        _ => None,
    };
    let checked_name = match (&name, &prefix) {
        (Some(name), _) => name.to_string(),
        (None, Some(prefix)) => format!("{prefix}x"),
        (None, None) => return Err(invalid("has no metadata.name".into())),
    };
    let (group, version) = split_api_version(&api_version);
    let gvk = GroupVersionKind::gvk(group, version, &kind);
    let namespace = namespace.map(Cow::into_owned);
    let mut target = Target::checked(call, plugin, gvk, namespace, checked_name)?;
    if let Some(prefix) = prefix {
        target.name = prefix;
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(json: &str, generate: bool) -> Result<String, String> {
        object_head("create", "p", json, generate)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_target_is_read_from_the_object_without_the_rest() {
        let deployment = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": []}}}}"#;
        assert_eq!(
            head(deployment, false).as_deref(),
            Ok("apps/v1/Deployment shop/web")
        );
        let generated = r#"{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"generateName": "cm-", "namespace": "a"}}"#;
        assert_eq!(head(generated, true).as_deref(), Ok("v1/ConfigMap a/cm-"));
        let e = head(generated, false).expect_err("no name without generate");
        assert!(e.contains("has no metadata.name"), "{e}");
    }

    #[test]
    fn what_is_missing_or_malformed_is_named() {
        for (json, why) in [
            (
                r#"{"kind": "ConfigMap", "metadata": {"name": "a"}}"#,
                "has no apiVersion",
            ),
            (
                r#"{"apiVersion": "v1", "metadata": {"name": "a"}}"#,
                "has no kind",
            ),
            ("[1, 2]", "is not JSON"),
            (
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "kind": "Secret"}"#,
                "duplicate",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a?b"}}"#,
                "'?'",
            ),
        ] {
            let e = head(json, false).expect_err(json);
            assert!(e.contains(why), "{json}: {e}");
        }
    }
}
