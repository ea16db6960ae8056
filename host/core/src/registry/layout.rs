//! The CNCF Wasm OCI artifact layout a plugin is pushed in and pulled from: one layer
//! holding the component, and a config that says what it exports and imports, so a
//! registry's UI and tools such as `wkg` and `oras` can tell a plugin from an image.
//!
//! Written here rather than taken from `oci-wasm`: its current release pins an older
//! `oci-client` whose TLS features bring a second crypto provider next to the one kube
//! uses, and another `wit-component` line; the layout itself is a small JSON document
//! (tag-runtime's "Wasm OCI Artifact layout", v0).

use serde::Serialize;

/// The layer's media type this host writes: the CNCF layout's.
pub const WASM_LAYER: &str = "application/wasm";
/// The layer's media type older tools (`wasm-to-oci`, early `wkg`) write; read too.
pub const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// The config's media type of the CNCF layout.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// Layer media types a pull accepts, in the host's order of preference.
pub const ACCEPTED_LAYERS: [&str; 2] = [WASM_LAYER, LEGACY_WASM_LAYER];

/// The config document of the CNCF layout.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// When it was made: the Unix epoch, so the same component always makes the same
    /// config and manifest, and so the same digest (pushing it again is no upgrade).
    created: &'static str,
    /// Always `wasm`.
    architecture: &'static str,
    /// The target the component is built for: `wasip2`.
    os: &'static str,
    /// The digests of the layers, in order.
    layer_digests: Vec<String>,
    /// What the component exports and imports.
    component: ComponentShape,
}

/// A component's world, as interface names.
#[derive(Debug, Serialize)]
struct ComponentShape {
    exports: Vec<String>,
    imports: Vec<String>,
    /// The world it targets, when known; never inferred here.
    target: Option<String>,
}

/// Why a file cannot be pushed as a plugin.
#[derive(Debug, thiserror::Error)]
#[error("not a WebAssembly component: {0}")]
pub struct NotAComponent(String);

impl WasmConfig {
    /// The config of `component` (its bytes), whose layer has `layer_digest`.
    pub fn of(component: &[u8], layer_digest: String) -> Result<WasmConfig, NotAComponent> {
        if !wasmparser::Parser::is_component(component) {
            return Err(NotAComponent("no component header".into()));
        }
        let decoded = wit_component::decode(component).map_err(|e| NotAComponent(e.to_string()))?;
        let wit_component::DecodedWasm::Component(resolve, world) = decoded else {
            return Err(NotAComponent("a WIT package, not a component".into()));
        };
        let world = &resolve.worlds[world];
        let names = |items: &mut dyn Iterator<Item = &wit_parser::WorldKey>| {
            let mut names: Vec<String> = items.map(|key| resolve.name_world_key(key)).collect();
            names.sort();
            names
        };
        Ok(WasmConfig {
            created: "1970-01-01T00:00:00Z",
            architecture: "wasm",
            os: "wasip2",
            layer_digests: vec![layer_digest],
            component: ComponentShape {
                exports: names(&mut world.exports.keys()),
                imports: names(&mut world.imports.keys()),
                target: None,
            },
        })
    }

    /// The document's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: no imports, no exports.
    fn empty_component() -> Vec<u8> {
        wasm_encoder::Component::new().finish()
    }

    #[test]
    fn the_config_says_wasm_wasip2_and_is_the_same_for_the_same_component() {
        let config = WasmConfig::of(&empty_component(), "sha256:ab".into()).expect("component");
        let json: serde_json::Value = serde_json::from_slice(&config.to_bytes()).expect("json");
        assert_eq!(json["architecture"], "wasm");
        assert_eq!(json["os"], "wasip2");
        assert_eq!(json["layerDigests"][0], "sha256:ab");
        assert_eq!(json["component"]["exports"], serde_json::json!([]));
        let again = WasmConfig::of(&empty_component(), "sha256:ab".into()).expect("component");
        assert_eq!(config.to_bytes(), again.to_bytes());
    }

    #[test]
    fn a_core_module_is_not_pushed_as_a_plugin() {
        let module = wasm_encoder::Module::new().finish();
        let refused = WasmConfig::of(&module, "sha256:ab".into()).expect_err("a module");
        assert!(
            refused
                .to_string()
                .starts_with("not a WebAssembly component"),
            "{refused}"
        );
    }
}
