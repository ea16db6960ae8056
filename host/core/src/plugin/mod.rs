//! What a plugin file is before it runs: the file, read only as a bounded regular file
//! inside its directory and named by its file name (its identity), and its
//! registration, checked against the host's rules. Shared by the manager, `rbac` and
//! the test kit, below all of them.

pub mod file;
pub mod name;
mod validate;

pub use validate::{InvalidRegistration, validate};
