//! Levelled, structured logging into the host's log, tagged with the plugin and the
//! current key.

pub use crate::wit::wcm::controller::log::Level;
use crate::wit::wcm::controller::log::log;

/// Very detailed tracing.
pub fn trace(message: &str) {
    with(Level::Trace, message, &[]);
}

/// Debugging detail.
pub fn debug(message: &str) {
    with(Level::Debug, message, &[]);
}

/// Normal operation.
pub fn info(message: &str) {
    with(Level::Info, message, &[]);
}

/// Something unexpected but handled.
pub fn warn(message: &str) {
    with(Level::Warn, message, &[]);
}

/// A failure.
pub fn error(message: &str) {
    with(Level::Error, message, &[]);
}

/// A line with key-value fields (`&[("count", "3")]`), which the host logs as a
/// `fields` value of the line (`fields="count=3"`). Keys are short identifiers
/// (`[A-Za-z0-9_.-]`, at most 64 bytes); at most 16 fields are kept.
pub fn with(level: Level, message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = (fields.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    log(level, message, &fields);
}
