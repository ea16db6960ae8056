//! The `WasmPlugin` custom resource: one plugin, pulled from an OCI registry, declared
//! in the host's namespace. Its name is the plugin's identity (its ServiceAccount,
//! field manager, metrics), chosen by whoever may create the resource, never by the
//! code it runs.
//!
//! Namespaced, in the host's own namespace, rather than cluster-scoped: creating one
//! runs code, so the right to do it is a Role in one namespace that an operator grants
//! deliberately, and two installations of the host in two namespaces each run their
//! own plugins without seeing each other's (docs/deploying.md says more).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What plugin to run, from where, with which settings.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "wasm-controller-manager.io",
    version = "v1alpha1",
    kind = "WasmPlugin",
    plural = "wasmplugins",
    shortname = "wp",
    namespaced,
    status = "WasmPluginStatus",
    // So a removal can keep it (`kubectl delete -k deploy/ -l '!wasm-controller-manager.io/crd'`):
    // deleting the CRD deletes every `WasmPlugin` of the cluster, other installs' too.
    label("wasm-controller-manager.io/crd", "wasmplugins"),
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.digest","priority":0}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginSpec {
    /// The plugin's OCI reference: `registry[:port]/repository:tag`, resolved to a
    /// digest once and pinned in status, or `...@sha256:<digest>`, taken as it is.
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,
    /// The plugin's settings, as its settings file would hold them: any JSON object,
    /// handed to the plugin by `config.settings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
    /// Stop running the plugin (its queue and informer subscriptions released) while
    /// keeping the resource.
    #[serde(default)]
    pub paused: bool,
    /// A `kubernetes.io/dockerconfigjson` Secret in the host's namespace holding the
    /// registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub pull_secret: Option<String>,
    /// Require a signature (cosign's format) over the manifest digest by this key,
    /// checked before anything is compiled; a host may require keys of its own too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySpec>,
}

/// A signature policy.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifySpec {
    /// An ECDSA P-256 public key in PEM (`cosign generate-key-pair`'s `cosign.pub`).
    #[schemars(length(max = 4096))]
    pub public_key: String,
}

/// What the host has made of a `WasmPlugin`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The reference pulled, pinned to its digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1200))]
    pub image: Option<String>,
    /// The manifest digest of the version running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 80))]
    pub digest: Option<String>,
    /// The contract version the running plugin was built against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub contract: Option<String>,
    /// The plugin table's state: running, degraded, crash-looping, forbidden, waiting,
    /// failed, paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub state: Option<String>,
    /// The rules its registration implies, and how many of them RBAC grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<RuleCounts>,
    /// `Pulled`, `Loaded` and `Ready`, each with a reason and a message an operator can
    /// act on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
}

/// Declared against granted rules.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RuleCounts {
    /// Rules the registration implies.
    #[schemars(range(max = MAX_RULES))]
    pub declared: u32,
    /// Of those, rules RBAC grants the plugin's ServiceAccount.
    #[schemars(range(max = MAX_RULES))]
    pub granted: u32,
}

/// The most rules a status counts: far more than any registration implies, and the
/// API server refuses a status written with more (`u32` would fail to decode).
pub const MAX_RULES: u32 = 1_000_000;

/// The most top-level keys `spec.settings` may have (the API server refuses more; the
/// host bounds the settings' size and depth when it reads them).
pub const MAX_SETTINGS_KEYS: u32 = 256;

/// An object of any fields, kept as written (`x-kubernetes-preserve-unknown-fields`),
/// with at most [`MAX_SETTINGS_KEYS`] keys. A structural schema cannot bound the depth
/// of such an object, nor CEL measure it: the host refuses settings nested deeper than
/// its bound when it reads them, and decodes each `WasmPlugin` on its own, so one too
/// deep to decode costs only itself.
fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": MAX_SETTINGS_KEYS,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The CRD as YAML, as `deploy/crds/wasmplugins.yaml` and the chart's `crds/` hold it.
pub fn crd_yaml() -> String {
    use kube::CustomResourceExt;
    let header = "# Generated by `wasm-controller-manager crd` from host/daemon/src/wasmplugin/resource.rs.\n";
    let body = serde_saphyr::to_string(&WasmPlugin::crd()).unwrap_or_default();
    format!("{header}{body}")
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    #[test]
    fn the_crds_in_deploy_and_the_chart_are_the_one_the_types_make() {
        let generated = crd_yaml();
        for file in [
            "deploy/crds/wasmplugins.yaml",
            "charts/wasm-controller-manager/crds/wasmplugins.yaml",
        ] {
            let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                written == generated,
                "{file} is stale: run `cargo run -p wasm-controller-manager -- crd > {file}`"
            );
        }
    }

    #[test]
    fn a_wasm_plugin_reads_as_an_operator_writes_it() {
        let yaml = r#"{"apiVersion": "wasm-controller-manager.io/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "pod-counter", "namespace": "wcm-system"},
            "spec": {"image": "r.example/plugins/pod-counter:v1",
                     "settings": {"labelKey": "pods"}, "pullSecret": "pull"}}"#;
        let plugin: WasmPlugin = serde_json::from_str(yaml).expect("a WasmPlugin");
        assert_eq!(plugin.spec.image, "r.example/plugins/pod-counter:v1");
        assert!(!plugin.spec.paused);
        assert_eq!(plugin.spec.pull_secret.as_deref(), Some("pull"));
        assert_eq!(WasmPlugin::crd().spec.scope, "Namespaced");
    }
}
