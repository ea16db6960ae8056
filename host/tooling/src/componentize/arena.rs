//! A safe home for the WASI adapter's state in a Go plugin.
//!
//! The WASI preview 1 adapter allocates its state (open descriptors, buffers) with the
//! main module's `cabi_realloc` when the module first calls WASI (and its stack,
//! through code `wit-component` adds). A Go module cannot
//! offer one: Go calls WASI while its runtime initialises, and an exported Go function
//! called then traps. Without it the adapter's state is put on pages added with
//! `memory.grow`, which Go's allocator also believes are its own (it grows memory from
//! where it last stopped and ignores pages added by others), so a growing Go heap
//! overwrites the adapter's state: a larger Go plugin (one importing `k8s.io/api`)
//! trapped in the adapter before it could register.
//!
//! The Go SDK therefore reserves an arena among Go's static data (a global array that
//! starts with [`MAGIC`]), which Go's heap never covers, and `componentize` adds to
//! the module a `cabi_realloc` that hands the adapter memory from that arena without
//! running any Go code. Written here because no tool offers it; the module is
//! re-encoded with `wasm-encoder`'s round-trip encoder, changing nothing else.

use wasm_encoder::reencode::{Error, Reencode, utils};
use wasm_encoder::{
    CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection, GlobalSection,
    GlobalType, Instruction, TypeSection, ValType,
};
use wasmparser::{DataKind, Operator, Parser, Payload};

/// The first bytes of the Go SDK's arena (`guest-sdk-go/controller/abi.go`).
pub const MAGIC: &[u8] = b"wasm-controller-manager:adapter-arena:v1\0";
/// The arena's size, as the Go SDK declares it: the adapter takes a 64 KiB stack and
/// a 64 KiB state from it.
pub const ARENA_BYTES: u32 = 192 << 10;

/// What the module already has, so the additions take the next indices.
#[derive(Debug, Default)]
struct Counts {
    types: u32,
    functions: u32,
    globals: u32,
    has_realloc: bool,
}

/// The module with a `cabi_realloc` over the Go SDK's arena, if it has the arena and
/// no `cabi_realloc` of its own; else none (the module is used as it is).
pub fn with_adapter_arena(module: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let (counts, arena) = survey(module)?;
    let Some(arena) = arena else {
        return Ok(None);
    };
    if counts.has_realloc {
        return Ok(None);
    }
    let start = (arena + MAGIC.len() as u32).next_multiple_of(16);
    let mut adder = AddRealloc {
        counts,
        start,
        end: arena + ARENA_BYTES,
    };
    let mut encoded = wasm_encoder::Module::new();
    utils::parse_core_module(&mut adder, &mut encoded, Parser::new(0), module)
        .map_err(|e| format!("cannot re-encode the module: {e}"))?;
    Ok(Some(encoded.finish()))
}

/// Counts the module's types, functions and globals and finds the arena's address.
fn survey(module: &[u8]) -> Result<(Counts, Option<u32>), String> {
    let mut counts = Counts::default();
    let mut arena = None;
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(|e| e.to_string())? {
            Payload::TypeSection(s) => counts.types = s.count(),
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    match import.map_err(|e| e.to_string())?.ty {
                        wasmparser::TypeRef::Func(_) => counts.functions += 1,
                        wasmparser::TypeRef::Global(_) => counts.globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(s) => counts.functions += s.count(),
            Payload::GlobalSection(s) => counts.globals += s.count(),
            Payload::ExportSection(s) => {
                for export in s {
                    counts.has_realloc |= export.map_err(|e| e.to_string())?.name == "cabi_realloc";
                }
            }
            Payload::DataSection(s) => {
                for data in s {
                    arena = arena.or(arena_in(&data.map_err(|e| e.to_string())?));
                }
            }
            _ => {}
        }
    }
    Ok((counts, arena))
}

/// The arena's address if this data segment holds its start.
fn arena_in(data: &wasmparser::Data<'_>) -> Option<u32> {
    let DataKind::Active { offset_expr, .. } = &data.kind else {
        return None;
    };
    let Ok(Operator::I32Const { value }) = offset_expr.get_operators_reader().read() else {
        return None;
    };
    let at = data.data.windows(MAGIC.len()).position(|w| w == MAGIC)?;
    u32::try_from(value)
        .ok()?
        .checked_add(u32::try_from(at).ok()?)
}

/// Re-encodes the module unchanged but for a bump pointer global, the function
/// `cabi_realloc(old, old_len, align, new_len) -> ptr` and its export.
struct AddRealloc {
    counts: Counts,
    start: u32,
    end: u32,
}

impl Reencode for AddRealloc {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        types.ty().function(
            [ValType::I32, ValType::I32, ValType::I32, ValType::I32],
            [ValType::I32],
        );
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        functions.function(self.counts.types);
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_global_section(self, globals, section)?;
        let ty = GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        };
        globals.global(ty, &ConstExpr::i32_const(self.start as i32));
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        exports.export("cabi_realloc", ExportKind::Func, self.counts.functions);
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_code_section(self, code, section)?;
        code.function(&bump_allocator(self.counts.globals, self.end));
        Ok(())
    }
}

/// `p = align_up(next, align); if p + new_len > end { unreachable }; next = p +
/// new_len; p` — the adapter allocates once and never frees.
fn bump_allocator(next: u32, end: u32) -> Function {
    let (align, new_len, p) = (2, 3, 4);
    let mut f = Function::new([(1, ValType::I32)]);
    for instruction in [
        Instruction::GlobalGet(next),
        Instruction::LocalGet(align),
        Instruction::I32Add,
        Instruction::I32Const(1),
        Instruction::I32Sub,
        Instruction::I32Const(0),
        Instruction::LocalGet(align),
        Instruction::I32Sub,
        Instruction::I32And,
        Instruction::LocalTee(p),
        Instruction::LocalGet(new_len),
        Instruction::I32Add,
        Instruction::I32Const(end as i32),
        Instruction::I32GtU,
        Instruction::If(wasm_encoder::BlockType::Empty),
        Instruction::Unreachable,
        Instruction::End,
        Instruction::LocalGet(p),
        Instruction::LocalGet(new_len),
        Instruction::I32Add,
        Instruction::GlobalSet(next),
        Instruction::LocalGet(p),
        Instruction::End,
    ] {
        f.instruction(&instruction);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose data holds the arena's magic at `at`, as Go lays out its data.
    fn module_with_data(at: u32, bytes: &[u8]) -> Vec<u8> {
        let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
        let text = format!(
            r#"(module (memory 4) (global $g (mut i32) (i32.const 0))
                 (func (export "f") (result i32) global.get $g)
                 (data (i32.const {at}) "{escaped}"))"#
        );
        wat::parse_str(text).expect("valid module")
    }

    #[test]
    fn a_module_with_the_arena_gets_an_allocator_inside_it() {
        let module = module_with_data(1024, MAGIC);
        let patched = with_adapter_arena(&module)
            .expect("re-encoded")
            .expect("the arena was found");
        let (counts, arena) = survey(&patched).expect("valid");
        assert!(counts.has_realloc);
        assert_eq!(arena, Some(1024));
        assert_eq!((counts.functions, counts.globals), (2, 2));
        wasmparser::Validator::new()
            .validate_all(&patched)
            .expect("the patched module validates");
    }

    #[test]
    fn a_module_without_the_arena_is_left_as_it_is() {
        let module = module_with_data(1024, b"other data");
        assert_eq!(with_adapter_arena(&module).expect("read"), None);
    }
}
