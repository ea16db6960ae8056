//! An instance's memories and tables are bounded in total, not each on its own, and a
//! component's shape is bounded at load. A crafted plugin — the contract's own exports
//! around a core module with four memories whose start function grows each to 60 MiB
//! and touches every page — is stopped with a memory limit error at about the 64 MiB
//! budget in all, and the process's peak resident memory grows by about that much,
//! not four times it (on-demand instances: the pool allows one memory per core module,
//! and the same limiter bounds its instances); one with more memories than a component
//! may define is refused at load with either allocator, saying why. Offline.

use crate::support;

use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use wasm_encoder::reencode::{Error, Reencode};
use wasm_encoder::{
    CodeSection, Function, FunctionSection, Instruction, MemArg, MemArgTarget, MemorySection,
    MemoryType, Module, SectionId, StartSection, TypeSection, ValType,
};
use wasmparser::{Parser, Payload};
use wcm_core::config::Limits;
use wcm_core::runtime::{CallError, PluginFile, Runtime};
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::{LiftLowerAbi, ManglingAndAbi, Resolve};

const CONTRACT: &str = include_str!("../../wit/controller.wit");
const MIB: u64 = 1 << 20;
const PAGE: u64 = 64 << 10;

/// The contract's dummy core module with `extra` memories more, each grown by its
/// start function to `grow_mib` and written on every page.
struct Hog {
    extra: u32,
    grow_mib: u64,
    /// Functions and memories the module imports and defines before ours.
    functions: u32,
    memories: u32,
    types: u32,
    started: bool,
}

impl Reencode for Hog {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_type_section(self, types, section)?;
        types.ty().function([], []);
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_function_section(self, functions, section)?;
        functions.function(self.types);
        Ok(())
    }

    fn parse_memory_section(
        &mut self,
        memories: &mut MemorySection,
        section: wasmparser::MemorySectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_memory_section(self, memories, section)?;
        for _ in 0..self.extra {
            memories.memory(MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
        }
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_code_section(self, code, section)?;
        code.function(&self.start_body());
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut Module,
        after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> Result<(), Error<Self::Error>> {
        let past_exports = after.is_some_and(|a| a as u8 >= SectionId::Export as u8);
        let before_elements = (before.is_none_or(|b| b as u8 >= SectionId::Element as u8))
            && before != Some(SectionId::Tag);
        if past_exports && before_elements && !self.started {
            self.started = true;
            let start = self.functions;
            module.section(&StartSection {
                function_index: start,
            });
        }
        Ok(())
    }
}

impl Hog {
    /// Grows each extra memory and stores a byte on every page of it.
    fn start_body(&self) -> Function {
        let mut f = Function::new([(1, ValType::I32)]);
        let pages = (self.grow_mib * MIB / PAGE) as i32;
        for memory in self.memories..self.memories + self.extra {
            f.instructions()
                .i32_const(pages)
                .memory_grow(memory)
                .drop()
                .i32_const(0)
                .local_set(0)
                .block(wasm_encoder::BlockType::Empty)
                .loop_(wasm_encoder::BlockType::Empty)
                .local_get(0)
                .i32_const(pages * PAGE as i32)
                .i32_ge_u()
                .br_if(1)
                .local_get(0)
                .i32_const(1)
                .i32_store8(MemArg {
                    offset: 0,
                    align: 0,
                    target: MemArgTarget::Memory(memory),
                    ordering: None,
                })
                .local_get(0)
                .i32_const(PAGE as i32)
                .i32_add()
                .local_set(0)
                .br(0)
                .end()
                .end();
        }
        f.instruction(&Instruction::End);
        f
    }
}

/// A component of the contract whose core module has `extra` memories more, each
/// grown to `grow_mib` at instantiation.
fn hog(extra: u32, grow_mib: u64) -> Result<Vec<u8>> {
    let mut resolve = Resolve::default();
    let package = resolve.push_str("controller.wit", CONTRACT)?;
    let world = resolve.select_world(&[package], Some("controller"))?;
    let abi = ManglingAndAbi::Legacy(LiftLowerAbi::Sync);
    let dummy = wit_component::dummy_module(&resolve, world, abi);
    let mut hog = Hog {
        extra,
        grow_mib,
        functions: 0,
        memories: 0,
        types: 0,
        started: false,
    };
    for payload in Parser::new(0).parse_all(&dummy) {
        match payload? {
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    if matches!(import?.ty, wasmparser::TypeRef::Func(_)) {
                        hog.functions += 1;
                    }
                }
            }
            Payload::FunctionSection(s) => hog.functions += s.count(),
            Payload::MemorySection(s) => hog.memories += s.count(),
            Payload::TypeSection(s) => hog.types += s.count(),
            _ => {}
        }
    }
    let mut module = Module::new();
    hog.parse_core_module(&mut module, Parser::new(0), &dummy)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut module = module.finish();
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8, false)?;
    ComponentEncoder::default()
        .module(&module)?
        .validate(true)
        .encode()
}

/// Peak resident memory of this process, in bytes, since it was last reset.
fn peak_rss() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = (status.lines())
        .find(|l| l.starts_with("VmHWM:"))
        .context("VmHWM")?;
    let kib: u64 = line.split_whitespace().nth(1).context("kB")?.parse()?;
    Ok(kib << 10)
}

/// Sets the peak back to what is resident now.
fn reset_peak() -> Result<()> {
    Ok(std::fs::write("/proc/self/clear_refs", "5")?)
}

/// A runtime with the default limits, its instances pooled or made on demand.
fn runtime(pooling: bool) -> Result<Arc<Runtime>> {
    let limits = Limits {
        pooling,
        ..Limits::default()
    };
    let runtime = Runtime::new(limits, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Arc::new(runtime))
}

/// Loads `bytes` and registers them: why either failed, if one did.
async fn load_and_register(runtime: &Arc<Runtime>, bytes: Vec<u8>) -> Option<String> {
    let file = PluginFile {
        hash: format!("hog-{}", bytes.len()),
        bytes,
        read: Default::default(),
    };
    match runtime.prepare(file).await {
        Err(e) => Some(e.to_string()),
        Ok(loaded) => loaded
            .code
            .register("hog.wasm")
            .await
            .err()
            .map(|e| e.to_string()),
    }
}

#[support::test]
async fn memories_and_tables_of_an_instance_are_bounded_together() -> Result<()> {
    // Four memories of 60 MiB, each under the 64 MiB limit on its own.
    let file = PluginFile {
        hash: "hog".into(),
        bytes: hog(3, 60)?,
        read: Default::default(),
    };
    let loaded = runtime(false)?.prepare(file).await?;
    reset_peak()?;
    let before = peak_rss()?;
    let refused = loaded.code.register("hog.wasm").await;
    let grown = peak_rss()?.saturating_sub(before);
    let error = refused
        .err()
        .context("a 240 MiB instance was let through")?;
    ensure!(
        matches!(error, CallError::MemoryLimit(limit) if limit == 64 << 20),
        "{error}"
    );
    ensure!(
        error
            .to_string()
            .contains("exceeded its memory limit of 67108864 bytes"),
        "{error}"
    );
    ensure!(
        grown < (64 + 32) * MIB,
        "the peak grew by {} MiB for a 64 MiB budget",
        grown / MIB
    );
    Ok(())
}

#[support::test]
async fn a_component_with_more_memories_than_a_plugin_may_define_is_refused() -> Result<()> {
    let bounds =
        "a plugin's component may create at most 32 core instances, 4 memories and 8 tables";
    for pooling in [true, false] {
        let refused = load_and_register(&runtime(pooling)?, hog(4, 0)?).await;
        let text = refused.context("five memories were let through")?;
        ensure!(text.contains("memor") && text.contains(bounds), "{text}");
    }
    Ok(())
}
