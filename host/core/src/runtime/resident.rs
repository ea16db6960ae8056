//! A plugin's code kept in memory only while it is wanted: a replica that runs a
//! plugin without holding its Lease (another replica serves it) parks the code —
//! drops its compiled module and pre-linked instance template, leaving only the
//! compile cache's entry on disk — and reads it back when it takes the Lease. A
//! Python plugin's code is some 36 MB, which every replica would otherwise keep for
//! plugins it does not serve.
//!
//! Only code in the compile cache can be parked: without a cache (`--no-compile-cache`)
//! reading it back would mean compiling again, so it stays. The entry is pinned for
//! the version's life, so the cache's own pruning never removes code a plugin will
//! read back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::artifacts::EntryPin;
use super::{LoadError, Loaded, PluginCode, Runtime};
use crate::bindings::ContractPre;

/// One version's code, in memory or parked.
pub struct ResidentCode {
    /// The component's content hash: its compile cache entry's key.
    hash: String,
    settings: Option<Arc<str>>,
    runtime: Arc<Runtime>,
    /// The code while in memory; `None` while parked.
    code: tokio::sync::Mutex<Option<PluginCode>>,
    /// Keeps the cache entry the code is read back from; `None` when there is no
    /// compile cache (the code is then never parked).
    pin: Option<EntryPin>,
    /// Set when the code could not be read back: the version's source must be loaded
    /// again.
    lost: AtomicBool,
    /// Bytes of the compiled image in memory now (0 while parked).
    bytes: AtomicUsize,
}

impl std::fmt::Debug for ResidentCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResidentCode")
            .field("hash", &self.hash)
            .finish()
    }
}

/// The code of a version, and whether it was read back from the compile cache just
/// now (and how long that took).
#[derive(Debug, Clone)]
pub struct Resumed {
    pub code: PluginCode,
    pub read_back: Option<Duration>,
}

impl ResidentCode {
    /// The code of `loaded`, in memory.
    pub fn new(loaded: &Loaded) -> ResidentCode {
        let runtime = loaded.code.runtime.clone();
        let pin = (runtime.cache.as_ref()).map(|cache| cache.pin(&loaded.component_hash));
        ResidentCode {
            hash: loaded.component_hash.clone(),
            settings: loaded.code.settings(),
            runtime,
            code: tokio::sync::Mutex::new(Some(loaded.code.clone())),
            pin,
            lost: AtomicBool::new(false),
            bytes: AtomicUsize::new(loaded.code.pre().image_bytes()),
        }
    }

    /// Bytes of compiled code kept in memory for this version now: its image while
    /// resident, 0 while parked (copies of one plugin share one image, each counting
    /// it).
    pub fn resident_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the code was parked and could not be read back (its cache entry was
    /// removed from outside the host, or no longer loads).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// The code, read back from the compile cache if it was parked.
    pub async fn get(&self) -> Result<Resumed, LoadError> {
        let mut code = self.code.lock().await;
        if let Some(code) = &*code {
            return Ok(Resumed {
                code: code.clone(),
                read_back: None,
            });
        }
        let started = Instant::now();
        let read = self.read_back().await;
        self.lost.store(read.is_err(), Ordering::Relaxed);
        let resumed = read?.with_settings(self.settings.clone());
        (self.bytes).store(resumed.pre().image_bytes(), Ordering::Relaxed);
        *code = Some(resumed.clone());
        Ok(Resumed {
            code: resumed,
            read_back: Some(started.elapsed()),
        })
    }

    /// Drops the code from memory, if it can be read back; true if it was in memory
    /// and is parked now. The memory is given back once the last call running it ends.
    pub fn park(&self) -> bool {
        if self.pin.is_none() {
            return false;
        }
        match self.code.try_lock() {
            Ok(mut code) => {
                self.bytes.store(0, Ordering::Relaxed);
                let parked = code.take().is_some();
                if parked {
                    // The heap its types and metadata used (the code itself is
                    // unmapped with it): a replica giving plugins away should shrink.
                    super::give_back_freed_memory();
                }
                parked
            }
            // Being read back: it is wanted again.
            Err(_) => false,
        }
    }

    /// The code of this hash: shared with a copy of the plugin that has it in memory,
    /// else read from the compile cache and linked again.
    async fn read_back(&self) -> Result<PluginCode, LoadError> {
        let runtime = &self.runtime;
        let slot = runtime.code_slot(&self.hash);
        let pre = {
            let mut shared = slot.lock().await;
            let pre = match shared.upgrade() {
                Some(pre) => Ok(pre),
                None => self.read_entry().await,
            };
            if let Ok(pre) = &pre {
                *shared = Arc::downgrade(pre);
            }
            pre
        };
        drop(slot);
        runtime.tidy_code();
        Ok(PluginCode::new(pre?, runtime.clone()))
    }

    /// The code of the compile cache's entry, linked.
    async fn read_entry(&self) -> Result<Arc<ContractPre>, LoadError> {
        let found = (self.runtime.blocking(&self.hash, Runtime::cached)).await?;
        let component = found.ok_or_else(|| LoadError::NotCached {
            hash: self.hash.clone(),
        })?;
        self.runtime.link(&component)
    }
}
