//! What a plugin author runs beside the daemon, on the runtime core alone: the offline
//! [`testkit`] (fixtures, virtual time, faults, replayed transcripts), [`scaffold`]ing
//! of new plugin projects in four languages, and [`componentize`] (a WASI preview 1
//! core module made a plugin component). The daemon does not link any of it.

pub mod componentize;
pub mod scaffold;
pub mod testkit;
