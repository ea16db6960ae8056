//! The compatibility policy, enforced by the loader (docs/contract-versions.md): any
//! patch release of a served minor version loads and is bound to that version; a
//! newer patch release that uses something this host lacks is refused naming it and
//! the versions involved; an unserved minor version is refused naming the served ones.
//! Components are made from the contract's own WIT (a dummy core module per world), so
//! only the version and the functions differ. Offline.

use crate::support;

use std::sync::Arc;

use anyhow::Result;
use wcm_core::bindings::ContractVersion;
use wcm_core::config::Limits;
use wcm_core::runtime::{LoadError, PluginFile, Runtime};
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::{LiftLowerAbi, ManglingAndAbi, Resolve};

const CURRENT: &str = include_str!("../../wit/controller.wit");
const PREVIOUS: &str = include_str!("../../wit/compat/v0.2/controller.wit");
/// The current WIT's package version.
const CURRENT_VERSION: &str = "0.3.1";

/// A core module of the `controller` world of `wit` in the canonical ABI, every
/// function a stub, and the world it implements.
fn core_module(wit: &str) -> Result<(Vec<u8>, Resolve, wit_parser::WorldId)> {
    let mut resolve = Resolve::default();
    let package = resolve.push_str("controller.wit", wit)?;
    let world = resolve.select_world(&[package], Some("controller"))?;
    let abi = ManglingAndAbi::Legacy(LiftLowerAbi::Sync);
    let module = wit_component::dummy_module(&resolve, world, abi);
    Ok((module, resolve, world))
}

/// A component of the `controller` world of `wit`, every function a stub.
fn component(wit: &str) -> Result<Vec<u8>> {
    let (mut module, resolve, world) = core_module(wit)?;
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8, false)?;
    ComponentEncoder::default()
        .module(&module)?
        .validate(true)
        .encode()
}

/// `wit` with its package version replaced.
fn versioned(wit: &str, from: &str, to: &str) -> String {
    let (old, new) = (
        format!("wcm:controller@{from};"),
        format!("wcm:controller@{to};"),
    );
    assert!(wit.contains(&old), "the WIT names {old}");
    wit.replace(&old, &new)
}

async fn load(wit: &str) -> Result<Result<ContractVersion, LoadError>> {
    load_component(component(wit)?).await
}

async fn load_component(bytes: Vec<u8>) -> Result<Result<ContractVersion, LoadError>> {
    let runtime = Runtime::new(Limits::default(), None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let runtime = Arc::new(runtime);
    let file = PluginFile {
        hash: format!("test-{}", bytes.len()),
        bytes,
        read: Default::default(),
    };
    Ok(runtime.prepare(file).await.map(|l| l.code.contract()))
}

#[support::test]
async fn every_patch_release_of_a_served_minor_version_loads_as_that_version() -> Result<()> {
    assert_eq!(load(CURRENT).await?.ok(), Some(ContractVersion::V0_3));
    let newer_patch = versioned(CURRENT, CURRENT_VERSION, "0.3.7");
    assert_eq!(load(&newer_patch).await?.ok(), Some(ContractVersion::V0_3));
    assert_eq!(load(PREVIOUS).await?.ok(), Some(ContractVersion::V0_2));
    let old_patch = versioned(PREVIOUS, "0.2.0", "0.2.4");
    assert_eq!(load(&old_patch).await?.ok(), Some(ContractVersion::V0_2));
    Ok(())
}

/// A plugin built against 0.3.0, before `count` and `list-first` (0.3.1) existed,
/// imports the 0.3.0 names of the functions it has: it keeps loading, bound to 0.3.
#[support::test]
async fn a_plugin_of_an_earlier_patch_release_keeps_loading() -> Result<()> {
    assert_eq!(
        load(&earlier_patch()).await?.ok(),
        Some(ContractVersion::V0_3)
    );
    Ok(())
}

/// The contract as 0.3.0 was: the current one without the functions 0.3.1 added.
fn earlier_patch() -> String {
    let earlier: String = versioned(CURRENT, CURRENT_VERSION, "0.3.0")
        .lines()
        .filter(|line| !line.contains("count: func") && !line.contains("list-first: func"))
        .collect::<Vec<_>>()
        .join("\n");
    for added in ["count: func", "list-first: func"] {
        assert!(!earlier.contains(added), "0.3.0 had no {added}");
    }
    earlier
}

#[support::test]
async fn a_newer_patch_release_using_what_this_host_lacks_is_refused_by_name() -> Result<()> {
    let newer = versioned(CURRENT, CURRENT_VERSION, "0.3.7").replace(
        "interface cluster {",
        "interface cluster {\n    frobnicate: func();",
    );
    let refused = load(&newer)
        .await?
        .expect_err("links a function the host lacks");
    let text = refused.to_string();
    assert!(text.contains("frobnicate"), "{text}");
    assert!(
        text.contains(
            "built against wcm:controller@0.3.7, newer than this host's wcm:controller@0.3.1"
        ),
        "{text}"
    );
    Ok(())
}

#[support::test]
async fn an_unserved_minor_version_is_refused_naming_the_served_ones() -> Result<()> {
    for version in ["0.4.0", "0.1.0", "1.0.0"] {
        let refused = load(&versioned(CURRENT, CURRENT_VERSION, version))
            .await?
            .expect_err(version);
        let text = refused.to_string();
        assert!(
            text.contains("wcm:controller@0.3.1 or wcm:controller@0.2.0"),
            "{version}: {text}"
        );
        assert!(
            text.contains(&format!("wcm:controller/reconciler@{version}")),
            "{text}"
        );
    }
    Ok(())
}

/// `componentize` (the Go SDK's path) makes a module a component of the version whose
/// reconciler it exports: a plugin built with a 0.2 Go SDK stays on 0.2 and keeps
/// loading; one built with the current SDK, or a 0.3.0 one, is 0.3.
#[support::test]
async fn componentize_embeds_the_contract_version_a_module_exports() -> Result<()> {
    for (wit, version) in [
        (CURRENT, ContractVersion::V0_3),
        (&earlier_patch(), ContractVersion::V0_3),
        (PREVIOUS, ContractVersion::V0_2),
    ] {
        let (module, _, _) = core_module(wit)?;
        let bytes = wcm_tooling::componentize::componentize(&module)?;
        let loaded = load_component(bytes).await?;
        assert_eq!(loaded.ok(), Some(version));
    }
    Ok(())
}
