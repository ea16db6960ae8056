//! The host side of the WIT contract, one module per version the host serves
//! (docs/contract-versions.md): each holds that version's `bindgen!` and converts its
//! types to the core's [`crate::contract`] types at the edge. A plugin is bound to the
//! version whose `reconciler` it exports; both versions' imports live in one linker.
//!
//! Two `bindgen!`s, not one: a generated world is one package version, and serving a
//! plugin built against the previous version means linking that version's imports and
//! calling that version's exports.

/// Conversions written the same in every served version but over each version's own
/// generated types, which no generic function can name: expanded inside each version
/// module, after its `bindgen!` and its `use`s of `wit` (the reconciler export), `Gvk`,
/// `ObjectRef`, `Propagation`, `log` and `c` (the core's `contract`), and its
/// `ReconcileError` (the error type of its `reconcile`).
macro_rules! shared_conversions {
    () => {
        /// Calls `register` in a fresh instance.
        pub(super) async fn register(
            pre: &ControllerPre<HostState>,
            store: &mut wasmtime::Store<HostState>,
        ) -> Result<c::Registration, super::CallFailure> {
            let controller = instantiate(pre, store).await?;
            let reg = (controller
                .wcm_controller_reconciler()
                .call_register(store)
                .await)
                .map_err(super::CallFailure::Call)?;
            Ok(registration(reg))
        }

        /// A new instance of the plugin in `store`, tried again while the operating
        /// system refuses it for now ([`super::retry`]).
        pub(super) async fn instantiate(
            pre: &ControllerPre<HostState>,
            store: &mut wasmtime::Store<HostState>,
        ) -> Result<Controller, super::CallFailure> {
            super::retry::instantiate(store, pre, |store, pre| {
                Box::pin(pre.instantiate_async(store))
            })
            .await
            .map_err(super::CallFailure::Instantiate)
        }

        /// A registration in the core's types; what differs between versions is
        /// each version's `watch`, `verbs` and `metrics`.
        fn registration(mut r: wit::Registration) -> c::Registration {
            let metrics = metrics(&mut r);
            c::Registration {
                name: r.name,
                registered_as: None,
                version: r.version,
                watches: r.watches.into_iter().map(watch).collect(),
                permissions: (r.permissions.into_iter())
                    .map(|p| c::Permission {
                        kind: gvk(p.kind),
                        verbs: verbs(p.verbs),
                    })
                    .collect(),
                max_concurrent_reconciles: r.max_concurrent_reconciles,
                resync_period_ms: r.resync_period_ms,
                metrics,
            }
        }

        /// Calls `reconcile` in `controller`; what it returned in the core's types
        /// (this version's `outcome`).
        pub(super) async fn reconcile(
            controller: &Controller,
            store: &mut wasmtime::Store<HostState>,
            request: &c::Request,
        ) -> Result<Result<c::Action, c::Failure>, super::CallFailure> {
            let returned = (controller.wcm_controller_reconciler())
                .call_reconcile(store, &wit_request(request))
                .await
                .map_err(super::CallFailure::Call)?;
            Ok(outcome(returned))
        }

        /// A host call's answer in this version's types: the plugin's result, or the
        /// trap of a host fault.
        type Answer<T> = wasmtime::Result<Result<T, Error>>;

        /// A host call's answer converted to this version's error.
        fn answer<T>(answered: crate::host_state::Answer<T>) -> Answer<T> {
            answered.map(|r| r.map_err(wit_error))
        }

        fn wit_request(r: &c::Request) -> wit::Request {
            wit::Request {
                kind: r.kind.clone().map(wit_gvk),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
            }
        }

        fn key_mapping(m: wit::KeyMapping) -> c::KeyMapping {
            match m {
                wit::KeyMapping::Object => c::KeyMapping::Object,
                wit::KeyMapping::ControllerOwner(o) => c::KeyMapping::ControllerOwner(gvk(o)),
                wit::KeyMapping::Fixed(key) => c::KeyMapping::Fixed(key),
            }
        }

        fn gvk(g: Gvk) -> c::Gvk {
            c::Gvk {
                group: g.group,
                version: g.version,
                kind: g.kind,
            }
        }

        fn wit_gvk(g: c::Gvk) -> Gvk {
            Gvk {
                group: g.group,
                version: g.version,
                kind: g.kind,
            }
        }

        fn object(o: ObjectRef) -> c::ObjectRef {
            c::ObjectRef {
                kind: gvk(o.kind),
                namespace: o.namespace,
                name: o.name,
            }
        }

        fn contract_propagation(p: Propagation) -> c::Propagation {
            match p {
                Propagation::Background => c::Propagation::Background,
                Propagation::Foreground => c::Propagation::Foreground,
                Propagation::Orphan => c::Propagation::Orphan,
            }
        }

        fn contract_level(l: log::Level) -> c::Level {
            match l {
                log::Level::Trace => c::Level::Trace,
                log::Level::Debug => c::Level::Debug,
                log::Level::Info => c::Level::Info,
                log::Level::Warn => c::Level::Warn,
                log::Level::Error => c::Level::Error,
            }
        }
    };
}

/// The `cluster` imports whose signatures every served version shares, forwarded to
/// the version-neutral calls: expanded inside each version's `impl cluster::Host`.
macro_rules! shared_cluster_calls {
    () => {
        async fn get(&mut self, obj: ObjectRef) -> Answer<String> {
            answer(self.host_get(object(obj)).await)
        }

        async fn list(
            &mut self,
            kind: Gvk,
            namespace: Option<String>,
            label_selector: Option<String>,
        ) -> Answer<Vec<String>> {
            answer(
                self.host_list(gvk(kind), namespace, label_selector, None)
                    .await,
            )
        }

        async fn patch_labels(
            &mut self,
            obj: ObjectRef,
            set: Vec<(String, String)>,
            remove: Vec<String>,
        ) -> Answer<()> {
            answer(self.host_patch_labels(object(obj), set, remove).await)
        }

        async fn apply(&mut self, object: String, force: bool) -> Answer<String> {
            answer(self.host_apply(object, force).await)
        }

        async fn patch_status(&mut self, obj: ObjectRef, status: String) -> Answer<()> {
            answer(self.host_patch_status(object(obj), status).await)
        }
    };
}

pub mod retry;
pub mod v0_2;
pub mod v0_3;

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use crate::contract::{Action, Failure, Registration, Request};
use crate::host_state::HostState;

/// The contract versions this host serves, newest first: (major, minor, patch).
pub const SERVED: [ContractVersion; 2] = [ContractVersion::V0_3, ContractVersion::V0_2];

/// A version of the `wcm:controller` package this host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContractVersion {
    /// `wcm:controller@0.2.x`, adapted to the core's types.
    V0_2,
    /// `wcm:controller@0.3.x`, the current version.
    V0_3,
}

impl ContractVersion {
    /// The newest patch release of this minor version the host implements.
    pub fn implemented(self) -> (u64, u64, u64) {
        match self {
            ContractVersion::V0_2 => (0, 2, 0),
            ContractVersion::V0_3 => (0, 3, 1),
        }
    }

    /// The version serving plugins built against `major.minor.patch`, if any:
    /// every patch release of a served minor version (additive changes only).
    pub fn serving(major: u64, minor: u64) -> Option<ContractVersion> {
        SERVED.into_iter().find(|v| {
            let (ma, mi, _) = v.implemented();
            (ma, mi) == (major, minor)
        })
    }
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor, patch) = self.implemented();
        write!(f, "wcm:controller@{major}.{minor}.{patch}")
    }
}

/// Adds the imports of every served version to `linker`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_2::Controller::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    v0_3::Controller::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    Ok(())
}

/// Where a call into a plugin failed: making the instance, or running the export.
#[derive(Debug)]
pub enum CallFailure {
    /// The instance could not be created.
    Instantiate(wasmtime::Error),
    /// The export trapped or was interrupted.
    Call(wasmtime::Error),
}

/// A plugin pre-linked against the version it was built for.
#[derive(Clone)]
pub enum ContractPre {
    /// A 0.2 plugin.
    V0_2(v0_2::ControllerPre<HostState>),
    /// A 0.3 plugin.
    V0_3(v0_3::ControllerPre<HostState>),
}

impl ContractPre {
    /// Type-checks the exports of `pre`'s component as `version`'s.
    pub fn new(
        version: ContractVersion,
        pre: InstancePre<HostState>,
    ) -> wasmtime::Result<ContractPre> {
        Ok(match version {
            ContractVersion::V0_2 => ContractPre::V0_2(v0_2::ControllerPre::new(pre)?),
            ContractVersion::V0_3 => ContractPre::V0_3(v0_3::ControllerPre::new(pre)?),
        })
    }

    /// The version the plugin was built against.
    pub fn version(&self) -> ContractVersion {
        match self {
            ContractPre::V0_2(_) => ContractVersion::V0_2,
            ContractPre::V0_3(_) => ContractVersion::V0_3,
        }
    }

    /// The engine the component was compiled for.
    pub fn engine(&self) -> &wasmtime::Engine {
        match self {
            ContractPre::V0_2(pre) => pre.engine(),
            ContractPre::V0_3(pre) => pre.engine(),
        }
    }

    /// Bytes of the compiled image (code and the data it was compiled with) this
    /// pre-linked component keeps mapped.
    pub fn image_bytes(&self) -> usize {
        let range = match self {
            ContractPre::V0_2(pre) => pre.instance_pre().component().image_range(),
            ContractPre::V0_3(pre) => pre.instance_pre().component().image_range(),
        };
        (range.end as usize).saturating_sub(range.start as usize)
    }

    /// Instantiates the plugin in `store` and calls `register`.
    pub async fn register(
        &self,
        store: &mut Store<HostState>,
    ) -> Result<Registration, CallFailure> {
        match self {
            ContractPre::V0_2(pre) => v0_2::register(pre, store).await,
            ContractPre::V0_3(pre) => v0_3::register(pre, store).await,
        }
    }

    /// A new instance of the plugin in `store`, for one call or several.
    pub async fn instantiate(
        &self,
        store: &mut Store<HostState>,
    ) -> Result<ContractInstance, CallFailure> {
        Ok(match self {
            ContractPre::V0_2(pre) => ContractInstance::V0_2(v0_2::instantiate(pre, store).await?),
            ContractPre::V0_3(pre) => ContractInstance::V0_3(v0_3::instantiate(pre, store).await?),
        })
    }
}

/// An instance of a plugin, bound to the contract version it was built against.
pub enum ContractInstance {
    /// A 0.2 plugin.
    V0_2(v0_2::Controller),
    /// A 0.3 plugin.
    V0_3(v0_3::Controller),
}

impl ContractInstance {
    /// Calls `reconcile` with `request` in this instance (which lives in `store`).
    pub async fn reconcile(
        &self,
        store: &mut Store<HostState>,
        request: &Request,
    ) -> Result<Result<Action, Failure>, CallFailure> {
        match self {
            ContractInstance::V0_2(c) => v0_2::reconcile(c, store, request).await,
            ContractInstance::V0_3(c) => v0_3::reconcile(c, store, request).await,
        }
    }
}
