//! An object of a list or a watch decoded on its own, so one object the host cannot
//! decode costs that object, never the list it came in.
//!
//! kube's client decodes a list whole (`ObjectList<K>`): one item nested deeper than
//! serde_json's recursion limit (128), or a field of the wrong type (a status integer
//! over `u32` written by someone else), fails every list of its kind, so an informer
//! never syncs and every plugin watching that kind stops with it, or a `WasmPlugin`
//! stops every other. As [`Decoded`], an item is first taken as raw JSON text (which
//! serde_json scans without recursion), then decoded alone; when that fails, what is
//! needed to name and track it (its name, namespace, uid, resourceVersion and
//! generation) is read from the same text, each field on its own, and the object is
//! [`Decoded::Undecodable`] with the cause.

use std::borrow::Cow;

use kube::api::ObjectMeta;
use kube::core::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// Longest cause kept, in bytes.
const MAX_CAUSE_BYTES: usize = 300;

/// One object as decoded alone.
#[derive(Debug, Clone)]
pub enum Decoded<K> {
    /// Decoded.
    Object(K),
    /// Not decodable: what could be read of it, and why.
    Undecodable(Box<Undecodable>),
}

/// An object the host cannot decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Undecodable {
    /// Its name, namespace, uid, resourceVersion and generation, as far as each could
    /// be read.
    pub meta: ObjectMeta,
    /// The decoder's complaint (escaped, cut).
    pub cause: String,
}

impl<K: DeserializeOwned> Decoded<K> {
    /// `text` decoded as `K`, else as much of its metadata as can be read.
    pub fn from_json(text: &str) -> Decoded<K> {
        match serde_json::from_str::<K>(text) {
            Ok(object) => Decoded::Object(object),
            Err(e) => Decoded::Undecodable(Box::new(Undecodable {
                meta: head_of(text),
                cause: crate::logs::escape_cut(&e.to_string(), MAX_CAUSE_BYTES).0,
            })),
        }
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(Decoded::from_json(raw.get()))
    }
}

impl<K: Resource> Resource for Decoded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    /// Metadata-only requests for `Decoded<PartialObjectMeta<_>>`, as for its inner type.
    fn metadata_api() -> bool {
        K::metadata_api()
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Decoded::Object(object) => object.meta(),
            Decoded::Undecodable(undecodable) => &undecodable.meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Decoded::Object(object) => object.meta_mut(),
            Decoded::Undecodable(undecodable) => &mut undecodable.meta,
        }
    }
}

/// The metadata fields of an object, each raw: any of them may be what fails.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    name: Option<Box<RawValue>>,
    #[serde(default)]
    namespace: Option<Box<RawValue>>,
    #[serde(default)]
    uid: Option<Box<RawValue>>,
    #[serde(default)]
    resource_version: Option<Box<RawValue>>,
    #[serde(default)]
    generation: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Outer {
    #[serde(default)]
    metadata: Option<Box<RawValue>>,
}

/// The identity fields of the object in `text`, each read on its own.
fn head_of(text: &str) -> ObjectMeta {
    let outer = serde_json::from_str::<Outer>(text).ok();
    let metadata = outer.and_then(|o| o.metadata);
    let head = (metadata.as_deref())
        .and_then(|m| serde_json::from_str::<Head>(m.get()).ok())
        .unwrap_or_default();
    let string = |raw: &Option<Box<RawValue>>| {
        (raw.as_deref()).and_then(|r| serde_json::from_str::<String>(r.get()).ok())
    };
    ObjectMeta {
        name: string(&head.name),
        namespace: string(&head.namespace),
        uid: string(&head.uid),
        resource_version: string(&head.resource_version),
        generation: (head.generation.as_deref())
            .and_then(|r| serde_json::from_str::<i64>(r.get()).ok()),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use serde_json::json;

    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }

    fn object(name: &str, spec: &str) -> String {
        format!(
            r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{name}",
            "namespace": "ns", "uid": "u-{name}", "resourceVersion": "7", "generation": 2}},
            "spec": {spec}}}"#
        )
    }

    #[test]
    fn one_object_too_deep_for_the_decoder_costs_that_object_only() {
        let list = format!(
            r#"{{"items": [{}, {}, {}]}}"#,
            object("a", "1"),
            object("deep", &nested(130)),
            object("c", "{}")
        );
        #[derive(Deserialize)]
        struct List {
            items: Vec<Decoded<DynamicObject>>,
        }
        let list: List = serde_json::from_str(&list).expect("the list decodes");
        let names: Vec<_> = (list.items.iter())
            .map(|d| d.meta().name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "deep", "c"]);
        assert!(matches!(list.items[0], Decoded::Object(_)));
        let Decoded::Undecodable(deep) = &list.items[1] else {
            panic!("the deep one is undecodable");
        };
        assert!(deep.cause.contains("recursion limit"), "{}", deep.cause);
        assert_eq!(deep.meta.namespace.as_deref(), Some("ns"));
        assert_eq!(deep.meta.uid.as_deref(), Some("u-deep"));
        assert_eq!(deep.meta.resource_version.as_deref(), Some("7"));
        assert_eq!(deep.meta.generation, Some(2));
    }

    #[test]
    fn a_field_of_the_wrong_type_keeps_the_rest_of_the_head() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Typed {
            metadata: ObjectMeta,
            status: Option<u32>,
        }
        let text = json!({"metadata": {"name": "x", "generation": "not a number"},
            "status": 4294967296u64})
        .to_string();
        let Decoded::<Typed>::Undecodable(u) = Decoded::from_json(&text) else {
            panic!("undecodable");
        };
        assert_eq!(u.meta.name.as_deref(), Some("x"));
        assert_eq!(
            u.meta.generation, None,
            "a field that does not read is left out"
        );
        let Decoded::<Typed>::Undecodable(none) = Decoded::from_json("[1, 2]") else {
            panic!("not an object");
        };
        assert_eq!(none.meta, ObjectMeta::default());
    }

    #[test]
    fn a_cause_is_escaped_and_cut() {
        let key = format!("\n{}", "k".repeat(1000));
        let text = json!({"metadata": {"name": "x"}, key: [1]}).to_string();
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Strict {
            metadata: ObjectMeta,
        }
        let Decoded::<Strict>::Undecodable(u) = Decoded::from_json(&text) else {
            panic!("undecodable");
        };
        assert!(!u.cause.contains('\n'));
        assert!(u.cause.len() <= MAX_CAUSE_BYTES + 40, "{}", u.cause.len());
    }
}
