//! Levelled logging into the host's log, tagged with the plugin and the current key.

use crate::wit::wcm::controller::log::{Level, log};

/// Very detailed tracing.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Debugging detail.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Normal operation.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Something unexpected but handled.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// A failure.
pub fn error(message: &str) {
    log(Level::Error, message);
}
