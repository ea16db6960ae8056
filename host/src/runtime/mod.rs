//! The Wasm runtime: one engine and linker for all plugins, loading of plugin
//! components, and sandboxed calls into them.

pub mod artifacts;
mod engine;
mod host_impl;
mod plugin;
mod state;
mod stderr;

pub use artifacts::Origin;
pub use engine::{EPOCH_TICK, EpochTicker, build_engine};
pub use plugin::{CallError, LoadError, PluginCode};
pub use state::HostState;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use artifacts::{ArtifactCache, content_hash};

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use crate::bindings::{Controller, ControllerPre, WIT_PACKAGE};
use crate::config::Limits;

/// Everything needed to load and run plugins. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    limits: Limits,
    cache: Option<ArtifactCache>,
    _ticker: EpochTicker,
}

/// The bytes of a plugin file and their hash.
#[derive(Debug)]
pub struct PluginFile {
    /// The whole file.
    pub bytes: Vec<u8>,
    /// SHA-256 of the bytes.
    pub hash: String,
    /// Time to read and hash.
    pub read: Duration,
}

impl PluginFile {
    /// Reads `path` whole and hashes it (the content is checked by `prepare`).
    pub async fn read(path: &Path) -> Result<PluginFile, LoadError> {
        let started = Instant::now();
        let bytes = tokio::fs::read(path).await.map_err(LoadError::Read)?;
        let hash = content_hash(&bytes);
        Ok(PluginFile {
            bytes,
            hash,
            read: started.elapsed(),
        })
    }
}

/// A loaded plugin file: its code, identity and how long each step took.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The pre-linked code.
    pub code: PluginCode,
    /// SHA-256 of the file's bytes.
    pub hash: String,
    /// Compiled now or read from the compile cache.
    pub origin: Origin,
    /// Time to read and hash the file.
    pub read: Duration,
    /// Time to compile, or to read and check the cache entry.
    pub compile: Duration,
    /// Time to type-check the exports and pre-link the imports.
    pub link: Duration,
}

impl Runtime {
    /// Builds the engine, links WASI (no files, no network) and the host imports, and
    /// starts the epoch ticker.
    /// Compiled plugins are cached in `cache_dir` if given.
    pub fn new(limits: Limits, cache_dir: Option<&Path>) -> wasmtime::Result<Runtime> {
        let engine = build_engine(&limits)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        Controller::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        Ok(Runtime {
            _ticker: EpochTicker::start(engine.clone()),
            cache: cache_dir.map(|dir| ArtifactCache::new(dir, &engine)),
            engine,
            linker,
            limits,
        })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Reads, validates, compiles (or takes from the compile cache) and pre-links one
    /// plugin file.
    pub async fn load(self: &Arc<Self>, path: &Path) -> Result<Loaded, LoadError> {
        let file = PluginFile::read(path).await?;
        self.prepare(file).await
    }

    /// Compiles a file read with [`PluginFile::read`] off the async threads (or takes
    /// it from the compile cache) and pre-links it.
    pub async fn prepare(self: &Arc<Self>, file: PluginFile) -> Result<Loaded, LoadError> {
        let PluginFile { bytes, hash, read } = file;
        check_header(&bytes)?;
        let started = Instant::now();
        let this = self.clone();
        let key = hash.clone();
        let (component, origin) = tokio::task::spawn_blocking(move || this.compile(&key, &bytes))
            .await
            .map_err(|e| LoadError::Compile(e.to_string()))??;
        let compile = started.elapsed();
        let started = Instant::now();
        check_exports(&component, &self.engine)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Link(chain(&e)))?;
        let pre = ControllerPre::new(pre).map_err(|e| LoadError::Link(chain(&e)))?;
        Ok(Loaded {
            code: PluginCode::new(pre, self.clone()),
            hash,
            origin,
            read,
            compile,
            link: started.elapsed(),
        })
    }

    /// The component from the cache if a valid entry exists, else compiled (and cached).
    fn compile(&self, hash: &str, bytes: &[u8]) -> Result<(Component, Origin), LoadError> {
        if let Some(cache) = &self.cache {
            match cache.read(&self.engine, hash) {
                Ok(Some(component)) => return Ok((component, Origin::Cached)),
                Ok(None) => {}
                Err(e) => tracing::warn!(entry = %cache.entry_path(hash).display(), error = %e,
                    "compile cache entry not used; compiling again"),
            }
        }
        let component =
            Component::new(&self.engine, bytes).map_err(|e| LoadError::Compile(chain(&e)))?;
        if let Some(cache) = &self.cache {
            cache.write(hash, &component);
        }
        Ok((component, Origin::Compiled))
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
