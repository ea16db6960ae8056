//! The Wasm runtime: one engine and linker for all plugins, loading of plugin
//! components, and sandboxed calls into them.

pub mod artifacts;
mod compiler;
mod engine;
pub mod entry;
pub mod functions;
mod plugin;
pub mod resident;
mod reuse;
pub mod settings;
pub mod worker;

pub use crate::host_state::{HostFault, HostState};
pub use artifacts::Origin;
pub use engine::{EPOCH_TICK, EpochTicker, TickingCall, build_engine, compile_config};
pub use plugin::{Blame, CallError, LoadError, PluginCode};
pub use resident::{ResidentCode, Resumed};
pub use reuse::{Recycle, ReusePolicy, ReusedInstance, outcome_text};

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use artifacts::{ArtifactCache, content_hash};
pub use compiler::give_back_freed_memory;
use compiler::{CompileTurns, release_freed_memory};
use worker::CompileWorker;

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::bindings::{ContractPre, ContractVersion, SERVED};
use crate::config::Limits;
use crate::plugin::file::{self as plugin_file, SizeLimit};

/// Everything needed to load and run plugins. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    limits: Limits,
    cache: Option<ArtifactCache>,
    turns: CompileTurns,
    /// Where plugins compile: in a child process when set (the daemon), else here
    /// (the offline tools, the tests of this crate).
    worker: Option<CompileWorker>,
    /// Per content hash, the pre-linked code while any plugin uses it: copies of one
    /// component (the same plugin under several names) share it, so each costs its
    /// instances and caches, not another copy of the code. Copies loaded at once (a
    /// host starting with several) take the hash's lock in turn, so only the first
    /// loads the code.
    code: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Weak<ContractPre>>>>>,
    ticker: EpochTicker,
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
    /// Reads `path` whole and hashes it (the content is checked by `prepare`): a
    /// regular file inside its directory, of at most `max_bytes`.
    pub async fn read(path: &Path, max_bytes: u64) -> Result<PluginFile, LoadError> {
        let started = Instant::now();
        let limit = SizeLimit {
            max: max_bytes,
            hint: " (--max-plugin-file-mib)",
        };
        let bytes = plugin_file::read_async(path, limit).await?;
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
    /// The version's hash: SHA-256 of the file's bytes, and of its settings if any.
    pub hash: String,
    /// SHA-256 of the component alone: the key of its compiled code in the compile
    /// cache.
    pub component_hash: String,
    /// Compiled now or read from the compile cache.
    pub origin: Origin,
    /// Time to read and hash the file.
    pub read: Duration,
    /// Time waiting for a turn to compile (files over 4 MiB compile one at a time).
    pub compile_wait: Duration,
    /// Time to compile, or to read and check the cache entry.
    pub compile: Duration,
    /// Time to type-check the exports and pre-link the imports.
    pub link: Duration,
}

impl Runtime {
    /// Bounds the compile cache to `max_bytes` of entries and compiled functions (otherwise
    /// [`crate::config::DEFAULT_COMPILE_CACHE_MAX_BYTES`]).
    pub fn with_compile_cache_max(mut self, max_bytes: u64) -> Runtime {
        self.cache = self.cache.map(|cache| cache.with_max_bytes(max_bytes));
        self
    }

    /// Compiles in child processes run by `worker` from now on: the daemon then never
    /// runs the compiler itself.
    pub fn with_compile_worker(mut self, worker: CompileWorker) -> Runtime {
        self.worker = Some(worker);
        self
    }

    /// Builds the engine, links WASI (no files, no network) and the host imports, and
    /// starts the epoch ticker.
    /// Compiled plugins are cached in `cache_dir` if given.
    pub fn new(limits: Limits, cache_dir: Option<&Path>) -> wasmtime::Result<Runtime> {
        let functions = cache_dir.map(artifacts::functions_dir_of);
        let engine = build_engine(&limits, functions.as_deref())?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        crate::bindings::add_to_linker(&mut linker)?;
        Ok(Runtime {
            ticker: EpochTicker::start(engine.clone()),
            cache: cache_dir.map(|dir| ArtifactCache::new(dir, &engine)),
            engine,
            linker,
            limits,
            turns: CompileTurns::default(),
            worker: None,
            code: Mutex::default(),
        })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Keeps the epoch advancing (deadlines, yields) for as long as the guard lives:
    /// held by every call into a plugin.
    pub fn ticking(&self) -> TickingCall {
        self.ticker.ticking()
    }

    /// Reads, validates, compiles (or takes from the compile cache) and pre-links one
    /// plugin file.
    pub async fn load(self: &Arc<Self>, path: &Path) -> Result<Loaded, LoadError> {
        let file = PluginFile::read(path, self.limits.max_plugin_file_bytes).await?;
        self.prepare(file).await
    }

    /// Compiles a file read with [`PluginFile::read`] off the async threads (or takes
    /// it from the compile cache) and pre-links it.
    pub async fn prepare(self: &Arc<Self>, file: PluginFile) -> Result<Loaded, LoadError> {
        let slot = self.code_slot(&file.hash);
        let loaded = {
            let mut shared = slot.lock().await;
            match shared.upgrade() {
                Some(pre) => Ok(self.shared(pre, file)),
                None => self.load_code(file, &mut shared).await,
            }
        };
        drop(slot);
        self.tidy_code();
        loaded
    }

    /// A file whose bytes are those of code already loaded: that code, shared.
    fn shared(self: &Arc<Self>, pre: Arc<ContractPre>, file: PluginFile) -> Loaded {
        Loaded {
            code: PluginCode::new(pre, self.clone()),
            component_hash: file.hash.clone(),
            hash: file.hash,
            origin: Origin::Shared,
            read: file.read,
            compile_wait: Duration::ZERO,
            compile: Duration::ZERO,
            link: Duration::ZERO,
        }
    }

    /// Compiles (or reads from the compile cache) and pre-links a file, and leaves a
    /// weak handle to its code in `shared` for copies of it.
    async fn load_code(
        self: &Arc<Self>,
        file: PluginFile,
        shared: &mut Weak<ContractPre>,
    ) -> Result<Loaded, LoadError> {
        let PluginFile { bytes, hash, read } = file;
        check_header(&bytes)?;
        let started = Instant::now();
        let mut compile_wait = Duration::ZERO;
        let (component, origin) = match self.blocking(&hash, Runtime::cached).await? {
            Some(component) => (component, Origin::Cached),
            None => {
                let turn = self.turns.turn(bytes.len()).await;
                compile_wait = turn.waited;
                let compiled = match &self.worker {
                    Some(worker) => self.compile_in_worker(worker, &hash, &bytes).await?,
                    None => (self.blocking(&hash, move |r, h| r.compile(h, &bytes))).await?,
                };
                (compiled, Origin::Compiled)
            }
        };
        let compile = started.elapsed().saturating_sub(compile_wait);
        let started = Instant::now();
        let pre = self.link(&component)?;
        *shared = Arc::downgrade(&pre);
        Ok(Loaded {
            code: PluginCode::new(pre, self.clone()),
            component_hash: hash.clone(),
            hash,
            origin,
            read,
            compile_wait,
            compile,
            link: started.elapsed(),
        })
    }

    /// Type-checks a component's exports against the contract and pre-links its
    /// imports.
    fn link(&self, component: &Component) -> Result<Arc<ContractPre>, LoadError> {
        let built_for = contract_of(component, &self.engine)?;
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| built_for.link_error(&e))?;
        let pre = ContractPre::new(built_for.serving, pre).map_err(|e| built_for.link_error(&e))?;
        Ok(Arc::new(pre))
    }

    /// The slot of `hash` in the map of code in use, made if missing.
    fn code_slot(&self, hash: &str) -> Arc<tokio::sync::Mutex<Weak<ContractPre>>> {
        let mut code = self.code.lock().unwrap_or_else(|p| p.into_inner());
        code.entry(hash.to_string()).or_default().clone()
    }

    /// Forgets the hashes no one loads and no plugin runs any more.
    fn tidy_code(&self) {
        let mut code = self.code.lock().unwrap_or_else(|p| p.into_inner());
        // Keep a hash while someone is loading it or a plugin still runs its code.
        code.retain(|_, slot| {
            Arc::strong_count(slot) > 1 || slot.try_lock().is_ok_and(|w| w.strong_count() > 0)
        });
    }

    /// Runs `work` (file reads, compilation) on a blocking thread.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        hash: &str,
        work: impl FnOnce(&Runtime, &str) -> Result<T, LoadError> + Send + 'static,
    ) -> Result<T, LoadError> {
        let (this, hash) = (self.clone(), hash.to_string());
        tokio::task::spawn_blocking(move || work(&this, &hash))
            .await
            .map_err(|e| LoadError::Compile(e.to_string()))?
    }

    /// The component from the compile cache, if a valid entry exists.
    fn cached(&self, hash: &str) -> Result<Option<Component>, LoadError> {
        let Some(cache) = &self.cache else {
            return Ok(None);
        };
        match cache.read(&self.engine, hash) {
            Ok(found) => Ok(found),
            Err(e) => {
                tracing::warn!(entry = %cache.entry_path(hash).display(), error = %e,
                    "compile cache entry not used; compiling again");
                Ok(None)
            }
        }
    }

    /// Compiles the component (and caches it), then gives the compiler's freed memory
    /// back.
    fn compile(&self, hash: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        let compiled = self
            .turns
            .run(bytes.len(), || Component::new(&self.engine, bytes));
        release_freed_memory();
        let component = compiled.map_err(|e| refused(chain(&e)))?;
        if let Some(cache) = &self.cache {
            cache.write(hash, &component);
        }
        Ok(component)
    }

    /// Has a worker compile the component into an entry of the compile cache (or a
    /// temporary file without one), loads it and keeps it in the cache.
    async fn compile_in_worker(
        self: &Arc<Self>,
        worker: &CompileWorker,
        hash: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        let entry = match &self.cache {
            Some(cache) => cache.new_entry_file(),
            None => tempfile::NamedTempFile::new(),
        };
        let entry =
            entry.map_err(|e| LoadError::Compile(format!("no file to compile into: {e}")))?;
        let functions = self.cache.as_ref().map(ArtifactCache::functions_dir);
        (worker.compile_retried(bytes, entry.path(), functions.as_deref(), hash)).await?;
        let max_bytes = worker.bounds().max_memory_bytes;
        self.blocking(hash, move |runtime, hash| {
            let component = runtime.load_worker_entry(entry.path(), max_bytes)?;
            if let Some(cache) = &runtime.cache {
                cache.adopt(hash, entry);
            }
            Ok(component)
        })
        .await
    }

    /// The component a worker wrote to `path` (it cannot be larger than the worker's
    /// memory).
    fn load_worker_entry(&self, path: &Path, max_bytes: u64) -> Result<Component, LoadError> {
        entry::load_entry(&self.engine, path, max_bytes).map_err(|e| match e {
            entry::EntryError::Incompatible(text) => refused(text),
            other => LoadError::Compile(format!("the compile worker's output: {other}")),
        })
    }
}

/// The load error of a component wasmtime refused; the instance pool refuses one
/// larger than its slots (on compiling, or loading compiled code), which its bounds
/// explain.
fn refused(text: String) -> LoadError {
    match text.contains("pooling allocator") {
        true => LoadError::Compile(format!("{text}: {}", crate::host_state::shape_bounds())),
        false => LoadError::Compile(text),
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

/// The contract version a component was built against, and the served version that
/// runs it.
struct BuiltFor {
    /// `major.minor.patch` of the `reconciler` it exports.
    exported: (u64, u64, u64),
    /// The served version of the same major.minor.
    serving: ContractVersion,
}

impl BuiltFor {
    /// A link failure, explained when the plugin is newer than the host: a later
    /// patch release of the contract may add imports this host lacks.
    fn link_error(&self, e: &wasmtime::Error) -> LoadError {
        let (major, minor, patch) = self.exported;
        let implemented = self.serving.implemented();
        let cause = chain(e);
        if (major, minor, patch) > implemented {
            return LoadError::Link(format!(
                "{cause} (built against wcm:controller@{major}.{minor}.{patch}, newer than \
                 this host's {}: it uses something this host does not have; upgrade the \
                 host or build against {})",
                self.serving, self.serving
            ));
        }
        LoadError::Link(cause)
    }
}

/// Which contract version the component implements, by its `reconciler` export:
/// any patch release of a served minor version (docs/contract-versions.md).
fn contract_of(component: &Component, engine: &Engine) -> Result<BuiltFor, LoadError> {
    const PREFIX: &str = "wcm:controller/reconciler@";
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let parsed = (exports.iter())
        .filter_map(|name| name.strip_prefix(PREFIX))
        .filter_map(|v| semver::Version::parse(v).ok())
        .find_map(|v| {
            let serving = ContractVersion::serving(v.major, v.minor)?;
            let exported = (v.major, v.minor, v.patch);
            Some(BuiltFor { exported, serving })
        });
    parsed.ok_or_else(|| LoadError::WrongContract {
        expected: SERVED
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" or "),
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
