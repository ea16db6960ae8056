//! A host fault: the host failed at its own part of a plugin's call (a bug of the
//! host's, never an answer about the plugin's input, rights or the cluster), kept
//! apart from the errors a plugin receives.
//!
//! A guest-visible error is an answer the plugin can act on (`not-found`, `forbidden`,
//! `unavailable`, ...). A host fault is not: telling the plugin `other` would make it
//! retry, give up or record a terminal failure for something it did not cause, and
//! would count against its health. So the import traps instead (wasmtime's trappable
//! imports: an `Err` from the host function ends the guest's call), the runtime finds
//! this type in the trap's error and reports the call as
//! [`crate::runtime::CallError::HostFault`], and the worker retries the key with
//! backoff without counting a crash. A panic in a capability is caught at the import
//! and becomes one too, so one host bug costs one reconcile, not the worker.

use std::any::Any;

use crate::contract::Capability;

/// The host failed at its own part of `function` for `plugin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host fault in {function} for plugin {plugin}: {message}")]
pub struct HostFault {
    /// The plugin whose call it was.
    pub plugin: String,
    /// The import, as `wcm_host_calls_total` names it.
    pub function: &'static str,
    /// What failed, naming the object when there is one.
    pub message: String,
}

impl HostFault {
    /// A fault in `function` for `plugin`.
    pub fn new(plugin: &str, function: Capability, message: String) -> HostFault {
        HostFault {
            plugin: plugin.to_string(),
            function: function.name(),
            message,
        }
    }
}

/// The message of a caught panic's payload (a `&str` or a `String`, as `panic!` makes).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = (payload.downcast_ref::<&str>().copied())
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    format!("panicked: {}", text.unwrap_or("(no message)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_names_the_plugin_the_import_and_the_cause() {
        let fault = HostFault::new("shop", Capability::Get, "encoding failed".into());
        assert_eq!(
            fault.to_string(),
            "host fault in get for plugin shop: encoding failed"
        );
    }

    #[test]
    fn a_panic_message_is_read_from_either_payload() {
        let caught = std::panic::catch_unwind(|| panic!("index {} out of range", 3));
        let payload = caught.expect_err("panicked");
        assert_eq!(panic_message(&*payload), "panicked: index 3 out of range");
        let caught = std::panic::catch_unwind(|| std::panic::panic_any(7u8));
        assert_eq!(
            panic_message(&*caught.expect_err("panicked")),
            "panicked: (no message)"
        );
    }
}
