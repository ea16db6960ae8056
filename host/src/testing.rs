//! What the host's own integration tests and benches reach below the daemon's surface:
//! the generated contract bindings (to call imports as a plugin would), the informers
//! and their cache (to build a plugin's view of a cluster without the daemon) and the
//! reconcile key. Not an API for other crates: the modules behind it are the crate's
//! own (`pub(crate)`), so the compiler still names what nothing uses, and this list is
//! the whole of what the tests depend on there.

pub use crate::bindings::{ContractVersion, v0_3};
pub use crate::keys::ReconcileKey;
pub use crate::kube::cache::{CachedObject, ObjectCache};
pub use crate::kube::decoded::{Decoded, Undecodable};
pub use crate::kube::informer::{Informer, InformerRegistry, WatchScope, metadata_of};
