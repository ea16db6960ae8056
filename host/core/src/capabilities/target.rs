//! The objects and kinds capabilities address, validated where they enter from a plugin.

use kube::core::GroupVersionKind;

use super::CapabilityError;
use crate::kube::discovery::display_gvk;
use crate::kube::names::{NameError, validate_kind, validate_name, validate_namespace};

/// One object as capabilities address it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its kind.
    pub gvk: GroupVersionKind,
    /// Its namespace, if namespaced.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", display_gvk(&self.gvk), self.name),
            None => write!(f, "{} {}", display_gvk(&self.gvk), self.name),
        }
    }
}

impl Target {
    /// A target from a plugin's input: kind, namespace and name are checked before
    /// they can reach a URL (the rules of `kube::names`). `op` and `plugin` name the
    /// call in the error.
    pub fn checked(
        op: &str,
        plugin: &str,
        gvk: GroupVersionKind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Target, CapabilityError> {
        let refuse = |e: NameError| invalid_input(op, plugin, e);
        check_kind(op, plugin, &gvk)?;
        if let Some(ns) = &namespace {
            validate_namespace(ns).map_err(refuse)?;
        }
        validate_name(&name).map_err(refuse)?;
        Ok(Target {
            gvk,
            namespace,
            name,
        })
    }
}

/// Checks a kind a plugin passes.
pub fn check_kind(op: &str, plugin: &str, gvk: &GroupVersionKind) -> Result<(), CapabilityError> {
    validate_kind(&gvk.group, &gvk.version, &gvk.kind).map_err(|e| invalid_input(op, plugin, e))
}

/// Checks a namespace a plugin passes.
pub fn check_namespace(op: &str, plugin: &str, namespace: &str) -> Result<(), CapabilityError> {
    validate_namespace(namespace).map_err(|e| invalid_input(op, plugin, e))
}

/// The error for malformed input: the call, the plugin, and what is wrong.
fn invalid_input(op: &str, plugin: &str, e: NameError) -> CapabilityError {
    CapabilityError::Invalid(format!("{op} by plugin {plugin}: {e}; nothing was sent"))
}
