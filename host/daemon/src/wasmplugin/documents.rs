//! `WasmPlugin`s written down: YAML or JSON as an operator keeps them or `kubectl get -o
//! yaml` prints them — one or more documents, each a `WasmPlugin` or a `List` of them —
//! for the commands that work offline (`rbac`).

use serde_json::Value;

use super::WasmPlugin;

/// Why a document holds no usable `WasmPlugin`.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// Not YAML or JSON.
    #[error("{what}: not YAML: {why}")]
    Syntax {
        /// The file.
        what: String,
        /// The parser's complaint.
        why: String,
    },
    /// A document of another kind, or a `WasmPlugin` that does not read as one.
    #[error("{what}: document {index}: {why}")]
    Document {
        /// The file.
        what: String,
        /// Which document, from 1.
        index: usize,
        /// What is wrong.
        why: String,
    },
    /// Nothing in it.
    #[error("{what}: no WasmPlugin")]
    Empty {
        /// The file.
        what: String,
    },
}

/// The `WasmPlugin`s of `text`, which `what` names in errors.
pub fn parse(text: &str, what: &str) -> Result<Vec<WasmPlugin>, DocumentError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| DocumentError::Syntax {
            what: what.to_string(),
            why: e.to_string(),
        })?;
    let mut found = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let wrong = |why: String| DocumentError::Document {
            what: what.to_string(),
            index: index + 1,
            why,
        };
        match document.get("kind").and_then(Value::as_str) {
            Some("List") => {
                let items = document.get("items").and_then(Value::as_array).cloned();
                for item in items.unwrap_or_default() {
                    found.push(serde_json::from_value(item).map_err(|e| wrong(e.to_string()))?);
                }
            }
            Some("WasmPlugin") => {
                found.push(serde_json::from_value(document).map_err(|e| wrong(e.to_string()))?)
            }
            Some(kind) => return Err(wrong(format!("a {kind}, not a WasmPlugin"))),
            None if document.is_null() => {}
            None => return Err(wrong("no kind".into())),
        }
    }
    match found.is_empty() {
        true => Err(DocumentError::Empty {
            what: what.to_string(),
        }),
        false => Ok(found),
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;

    const ONE: &str = "apiVersion: wasm-controller-manager.io/v1alpha1\nkind: WasmPlugin\n\
        metadata: {name: a}\nspec: {image: r.example/a:v1}\n";

    #[test]
    fn documents_and_lists_of_wasm_plugins_are_read() {
        let two = format!("{ONE}---\n{}", ONE.replace("name: a", "name: b"));
        let names: Vec<String> = parse(&two, "f")
            .expect("two")
            .iter()
            .map(|p| p.name_any())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "wasm-controller-manager.io/v1alpha1", "kind": "WasmPlugin",
             "metadata": {"name": "c"}, "spec": {"image": "r.example/c:v1"}}]}"#;
        assert_eq!(parse(list, "f").expect("a list")[0].name_any(), "c");
    }

    #[test]
    fn other_kinds_and_empty_files_are_refused_by_name() {
        let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
        let refused = parse(&format!("{ONE}---\n{secret}"), "plugins.yaml").expect_err("a Secret");
        assert_eq!(
            refused.to_string(),
            "plugins.yaml: document 2: a Secret, not a WasmPlugin"
        );
        let empty = parse("", "empty.yaml").expect_err("nothing");
        assert_eq!(empty.to_string(), "empty.yaml: no WasmPlugin");
    }
}
