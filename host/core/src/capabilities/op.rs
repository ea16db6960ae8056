//! What a capability call is about — the call and its object, as every message about it
//! begins (`patch apps/v1/Deployment shop/web (scale)`) — and the errors built from it,
//! so that a refusal reads the same whichever check or backend made it.

use std::fmt::Display;

use super::{CapabilityError, Target};
use crate::logs::shorten;

/// One call on one object, as its errors name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op(String);

impl Op {
    /// `call` on `target`: `delete v1/ConfigMap a/b`.
    pub fn on(call: &str, target: &Target) -> Op {
        Op(format!("{call} {target}"))
    }

    /// `call` on `target`'s `subresource`, if any: `patch v1/ConfigMap a/b (status)`.
    pub fn on_part(call: &str, target: &Target, subresource: Option<&str>) -> Op {
        match subresource {
            Some(sub) => Op(format!("{call} {target} ({})", shorten(sub))),
            None => Op::on(call, target),
        }
    }

    /// A call described in words of its own (`record-event Seen on v1/Pod a/b`).
    pub fn named(text: String) -> Op {
        Op(text)
    }

    /// `invalid`: the plugin's input or the object is not what the call needs.
    pub fn invalid(&self, why: impl Display) -> CapabilityError {
        CapabilityError::Invalid(format!("{self}: {why}"))
    }

    /// `unavailable`: the call could not be made now.
    pub fn unavailable(&self, why: impl Display) -> CapabilityError {
        CapabilityError::Unavailable(format!("{self}: {why}"))
    }

    /// A host fault: the host failed at its own part of the call (the plugin's call
    /// traps; it does not receive this as an error).
    pub fn host_fault(&self, why: impl Display) -> CapabilityError {
        CapabilityError::HostFault(format!("{self}: {why}"))
    }
}

impl Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Op {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}
