//! The Wasm runtime: one engine and linker for all plugins, loading of plugin
//! components, and sandboxed calls into them.

mod engine;
mod host_impl;
mod plugin;
mod state;

pub use engine::{EPOCH_TICK, EpochTicker, build_engine};
pub use plugin::{CallError, LoadError, PluginCode};
pub use state::HostState;

use std::path::Path;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use crate::bindings::{Controller, ControllerPre, WIT_PACKAGE};
use crate::config::Limits;

/// Everything needed to load and run plugins. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    limits: Limits,
    _ticker: EpochTicker,
}

impl Runtime {
    /// Builds the engine, links WASI (no files, no network) and the host imports, and
    /// starts the epoch ticker.
    pub fn new(limits: Limits) -> wasmtime::Result<Runtime> {
        let engine = build_engine(&limits)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        Controller::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        Ok(Runtime {
            _ticker: EpochTicker::start(engine.clone()),
            engine,
            linker,
            limits,
        })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Reads, validates, compiles (off the async threads) and pre-links one plugin.
    pub async fn load(self: &Arc<Self>, path: &Path) -> Result<PluginCode, LoadError> {
        let bytes = tokio::fs::read(path).await.map_err(LoadError::Read)?;
        check_header(&bytes)?;
        let engine = self.engine.clone();
        let started = std::time::Instant::now();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| LoadError::Compile(e.to_string()))?
            .map_err(|e| LoadError::Compile(chain(&e)))?;
        tracing::debug!(file = %path.display(), elapsed = ?started.elapsed(), "compiled");
        check_exports(&component, &self.engine)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Link(chain(&e)))?;
        let pre = ControllerPre::new(pre).map_err(|e| LoadError::Link(chain(&e)))?;
        Ok(PluginCode::new(pre, self.clone()))
    }
}

/// Wasm binaries start with `\0asm` and a version: 1 for core modules, 0x1000d for
/// components (version 13, layer 1).
fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE: [u8; 4] = [1, 0, 0, 0];
    const COMPONENT: [u8; 4] = [0x0d, 0, 1, 0];
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(LoadError::NotWasm);
    }
    match <[u8; 4]>::try_from(&bytes[4..8]) {
        Ok(v) if v == COMPONENT => Ok(()),
        Ok(v) if v == CORE => Err(LoadError::CoreModule),
        _ => Err(LoadError::UnknownVersion),
    }
}

/// The component must export the reconciler of our WIT package, same major.minor.
fn check_exports(component: &Component, engine: &Engine) -> Result<(), LoadError> {
    let wanted = WIT_PACKAGE.replace("wcm:controller@", "wcm:controller/reconciler@");
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.contains(&wanted) {
        return Ok(());
    }
    Err(LoadError::WrongContract {
        expected: wanted,
        found: exports,
    })
}

/// A wasmtime error with its causes, on one line.
pub fn chain(e: &wasmtime::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
