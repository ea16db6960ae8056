//! A plugin's settings from the operator: the file `<plugin>.settings.json` or
//! `<plugin>.settings.yaml` beside `<plugin>.wasm`, read when the plugin loads and
//! handed to it as JSON through the `config` import. A change of the file loads the
//! plugin again (the watcher reports it as a change of the plugin); settings that are
//! not a JSON or YAML mapping, or too large, fail the load like a broken plugin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::artifacts::content_hash;
use crate::plugin::file::{self as plugin_file, PluginFileError, SizeLimit};

/// Largest settings file read.
pub const MAX_SETTINGS_BYTES: u64 = 64 << 10;
/// Deepest nesting of settings handed to a plugin: far deeper than any plugin's
/// settings need, and shallow enough for every language's parser (serde_json stops
/// at 128, whatever the host would pass).
pub const MAX_SETTINGS_DEPTH: usize = 32;
/// The endings of a settings file, after the plugin's file stem.
pub const SETTINGS_SUFFIXES: [&str; 2] = [".settings.json", ".settings.yaml"];

/// Settings read for one plugin version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The settings as compact JSON: what the plugin reads.
    pub json: Arc<str>,
    /// SHA-256 of that JSON, part of the version's identity.
    pub hash: String,
    /// The file they came from.
    pub file: PathBuf,
}

/// Why a plugin's settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file cannot be read: not a regular file, outside the plugins directory,
    /// larger than [`MAX_SETTINGS_BYTES`].
    #[error("settings: {0}")]
    Read(#[from] PluginFileError),
    /// Not a mapping in JSON or YAML.
    #[error("settings {}: {reason}", .file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Both a JSON and a YAML file.
    #[error("settings: both {} and {} exist; keep one", .0.display(), .1.display())]
    Both(PathBuf, PathBuf),
}

/// The settings files a plugin at `plugin` (`x.wasm`) may have: `x.settings.json`
/// and `x.settings.yaml` beside it.
pub fn files_of(plugin: &Path) -> [PathBuf; 2] {
    let stem = (plugin.file_stem()).map_or_else(String::new, |s| s.to_string_lossy().into());
    SETTINGS_SUFFIXES.map(|suffix| plugin.with_file_name(format!("{stem}{suffix}")))
}

/// The plugin a settings file belongs to (`x.settings.yaml` → `x.wasm`), if `path`
/// names one.
pub fn plugin_of(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let stem = SETTINGS_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))?;
    (!stem.is_empty() && !stem.starts_with('.'))
        .then(|| path.with_file_name(format!("{stem}.wasm")))
}

/// Reads the settings beside `plugin`, if it has any.
pub async fn read_beside(plugin: &Path) -> Result<Option<Settings>, SettingsError> {
    let [json, yaml] = files_of(plugin);
    let found = (
        plugin_file::exists(&json).await,
        plugin_file::exists(&yaml).await,
    );
    let file = match found {
        (false, false) => return Ok(None),
        (true, true) => return Err(SettingsError::Both(json, yaml)),
        (true, false) => json,
        (false, true) => yaml,
    };
    read(&file).await.map(Some)
}

/// Settings given as a JSON object (a `WasmPlugin`'s `spec.settings`), `label` naming
/// where they come from; at most [`MAX_SETTINGS_BYTES`] as compact JSON.
pub fn of_object(
    object: &serde_json::Map<String, Value>,
    label: &str,
) -> Result<Settings, SettingsError> {
    let invalid = |reason: String| SettingsError::Invalid {
        file: PathBuf::from(label),
        reason,
    };
    let value = Value::Object(object.clone());
    let json = value.to_string();
    if json.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(invalid(format!(
            "{} bytes, over {MAX_SETTINGS_BYTES}",
            json.len()
        )));
    }
    check_depth(&value).map_err(invalid)?;
    Ok(Settings {
        hash: content_hash(json.as_bytes()),
        json: json.into(),
        file: PathBuf::from(label),
    })
}

/// Reads and checks one settings file: a regular file inside its directory, at most
/// [`MAX_SETTINGS_BYTES`], a JSON or YAML mapping.
pub async fn read(file: &Path) -> Result<Settings, SettingsError> {
    let limit = SizeLimit {
        max: MAX_SETTINGS_BYTES,
        hint: "",
    };
    let bytes = plugin_file::read_async(file, limit).await?;
    let invalid = |reason: String| SettingsError::Invalid {
        file: file.to_path_buf(),
        reason,
    };
    let text = String::from_utf8(bytes).map_err(|e| invalid(format!("not UTF-8: {e}")))?;
    let value: Value = match file.extension().and_then(|e| e.to_str()) {
        Some("yaml") => serde_saphyr::from_str(&text).map_err(|e| invalid(e.to_string()))?,
        _ => serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?,
    };
    if !value.is_object() {
        return Err(invalid("must be a mapping of names to values".into()));
    }
    check_depth(&value).map_err(invalid)?;
    let json = value.to_string();
    Ok(Settings {
        hash: content_hash(json.as_bytes()),
        json: json.into(),
        file: file.to_path_buf(),
    })
}

/// Whether `value` nests at most [`MAX_SETTINGS_DEPTH`] levels (walked without
/// recursion); why not.
fn check_depth(value: &Value) -> Result<(), String> {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        if depth > MAX_SETTINGS_DEPTH {
            return Err(format!("nested more than {MAX_SETTINGS_DEPTH} levels deep"));
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_nested_past_the_bound_are_refused_by_name() {
        let mut deep = serde_json::json!(1);
        for _ in 0..MAX_SETTINGS_DEPTH {
            deep = serde_json::json!({ "a": deep });
        }
        let Value::Object(fits) = deep.clone() else {
            panic!("an object")
        };
        assert!(of_object(&fits, "WasmPlugin x").is_ok());
        let Value::Object(over) = serde_json::json!({ "b": deep }) else {
            panic!("an object")
        };
        let refused = of_object(&over, "WasmPlugin x")
            .expect_err("too deep")
            .to_string();
        assert!(
            refused.contains("WasmPlugin x") && refused.contains("32 levels"),
            "{refused}"
        );
    }

    #[test]
    fn settings_files_belong_to_the_plugin_beside_them() {
        let dir = Path::new("/plugins");
        assert_eq!(
            plugin_of(&dir.join("web-app.settings.yaml")),
            Some(dir.join("web-app.wasm"))
        );
        assert_eq!(
            plugin_of(&dir.join("a.b.settings.json")),
            Some(dir.join("a.b.wasm"))
        );
        for other in [
            ".settings.json",
            ".x.settings.json",
            "x.settings.yml",
            "x.json",
            "x.wasm",
        ] {
            assert_eq!(plugin_of(&dir.join(other)), None, "{other}");
        }
        assert_eq!(
            files_of(&dir.join("web-app.wasm")),
            [
                dir.join("web-app.settings.json"),
                dir.join("web-app.settings.yaml")
            ]
        );
    }

    #[tokio::test]
    async fn yaml_and_json_read_as_the_same_json_and_wrong_files_say_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plugin = dir.path().join("p.wasm");
        assert!(read_beside(&plugin).await.expect("none").is_none());
        let [json, yaml] = files_of(&plugin);
        std::fs::write(&yaml, "namespaces: [a, b]\nreplicas: 2\n").expect("write");
        let from_yaml = read_beside(&plugin).await.expect("yaml").expect("some");
        assert_eq!(&*from_yaml.json, r#"{"namespaces":["a","b"],"replicas":2}"#);
        std::fs::write(&json, r#"{"replicas": 2, "namespaces": ["a", "b"]}"#).expect("write");
        let both = read_beside(&plugin).await.expect_err("both").to_string();
        assert!(both.contains("keep one"), "{both}");
        std::fs::remove_file(&yaml).expect("remove");
        let from_json = read_beside(&plugin).await.expect("json").expect("some");
        assert_eq!(
            from_json.hash, from_yaml.hash,
            "same settings, same identity"
        );
        for (text, reason) in [("[1, 2]", "must be a mapping"), ("{", "EOF")] {
            std::fs::write(&json, text).expect("write");
            let err = read_beside(&plugin).await.expect_err(text).to_string();
            assert!(
                err.contains("p.settings.json") && err.contains(reason),
                "{err}"
            );
        }
        std::fs::write(&json, "x".repeat(MAX_SETTINGS_BYTES as usize + 1)).expect("write");
        let err = read_beside(&plugin).await.expect_err("large").to_string();
        assert!(err.contains("more than the limit of 65536"), "{err}");
    }
}
