//! Makes a plugin component of a WASI preview 1 core module that implements the
//! contract through the canonical ABI (Go's `GOOS=wasip1 -buildmode=c-shared`
//! reactors): embeds the contract's WIT as the module's component type and adapts
//! WASI preview 1 with the reactor adapter of the wasmtime release the host runs, as
//! `wasm-tools component embed` + `component new --adapt` would, without either tool.

mod arena;

pub use arena::{ARENA_BYTES, MAGIC as ARENA_MAGIC};

use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

/// The contract versions the host serves, as it was built with them: a module is
/// made a component of the version whose `reconciler` it exports.
const CONTRACTS: [(&str, &str); 2] = [
    ("0.3.", include_str!("../../../../wit/controller.wit")),
    (
        "0.2.",
        include_str!("../../../../wit/compat/v0.2/controller.wit"),
    ),
];
/// The world plugins implement.
const WORLD: &str = "controller";

/// A core module could not be made a plugin component.
#[derive(Debug, thiserror::Error)]
pub enum ComponentizeError {
    /// The host's own contract did not parse (a build defect).
    #[error("the contract's WIT: {0}")]
    Contract(String),
    /// The module's imports or exports do not match the contract's canonical ABI.
    #[error("not a core module of the contract's world {WORLD}: {0}")]
    Module(String),
}

/// The component of `module`: its exports lifted and imports lowered as the contract's
/// world says, WASI preview 1 adapted to preview 2.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, ComponentizeError> {
    let contract = contract_of(module)?;
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("controller.wit", &contract)
        .map_err(|e| ComponentizeError::Contract(format!("{e:#}")))?;
    let world = resolve
        .select_world(&[package], Some(WORLD))
        .map_err(|e| ComponentizeError::Contract(format!("{e:#}")))?;
    let mut module = match arena::with_adapter_arena(module) {
        Ok(with_arena) => with_arena.unwrap_or_else(|| module.to_vec()),
        Err(cause) => return Err(ComponentizeError::Module(cause)),
    };
    let invalid = |e: anyhow::Error| ComponentizeError::Module(format!("{e:#}"));
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8, false)
        .map_err(invalid)?;
    let adapter = wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .and_then(|e| e.adapter("wasi_snapshot_preview1", adapter))
        .and_then(|e| e.encode())
        .map_err(invalid)
}

/// The WIT of the contract version whose `reconciler` the module exports
/// (`wcm:controller/reconciler@0.2.0#register`), at the module's own patch release:
/// a module built with an earlier 0.3.z SDK names its imports and exports `@0.3.z`,
/// and within a minor version the WIT only gained functions, which a module that
/// does not import them never sees.
fn contract_of(module: &[u8]) -> Result<String, ComponentizeError> {
    const PREFIX: &str = "wcm:controller/reconciler@";
    let invalid = |e: wasmparser::BinaryReaderError| ComponentizeError::Module(e.to_string());
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let wasmparser::Payload::ExportSection(exports) = payload.map_err(invalid)? else {
            continue;
        };
        for export in exports {
            let Some(version) = export.map_err(invalid)?.name.strip_prefix(PREFIX) else {
                continue;
            };
            if let Some((_, wit)) = CONTRACTS.iter().find(|(v, _)| version.starts_with(v)) {
                return at_release(wit, version);
            }
        }
    }
    Err(ComponentizeError::Module(format!(
        "exports no {PREFIX}0.3.x or 0.2.x functions (register, reconcile)"
    )))
}

/// `wit` with its package version set to `export`'s (`0.3.0#register`).
fn at_release(wit: &str, export: &str) -> Result<String, ComponentizeError> {
    let release = export.split('#').next().unwrap_or(export);
    if semver::Version::parse(release).is_err() {
        return Err(ComponentizeError::Module(format!(
            "exports wcm:controller/reconciler@{export}: not a version"
        )));
    }
    let declared = (wit.lines())
        .find_map(|line| line.strip_prefix("package wcm:controller@"))
        .and_then(|rest| rest.strip_suffix(';'))
        .ok_or_else(|| ComponentizeError::Contract("no package version".into()))?;
    let (from, to) = (
        format!("package wcm:controller@{declared};"),
        format!("package wcm:controller@{release};"),
    );
    Ok(wit.replacen(&from, &to, 1))
}
