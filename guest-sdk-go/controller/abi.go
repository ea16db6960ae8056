//go:build wasip1

// The canonical ABI of the contract, by hand: standard Go has no component
// bindings generator (wit-bindgen-go's module is not served by the Go module
// proxy, and TinyGo is not available), so this file lays out and reads the
// contract's records, lists, options, variants and results in linear memory as
// the Component Model's canonical ABI says, for wasm32 (pointers are 4 bytes).

package controller

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"unsafe"
)

// kept holds every buffer the host may still read (an export's result) or has just
// written (an import's result), so the garbage collector leaves it alone; it is
// emptied at the start of each export call, when nothing of the last one is used.
var kept [][]byte

// Go's collector is off in a plugin. The host writes an import's results through
// cabi_import_realloc, and a collection started by an allocation there calls WASI
// (clocks) from inside that callback, which the Component Model forbids: the
// instance would trap ("cannot leave component instance") on a large answer, such
// as a list of thousands of objects. Each reconcile runs in a fresh instance, so
// its garbage goes with it; Collect frees memory in a long one.
func init() { debug.SetGCPercent(-1) }

// adapterArena is where the WASI adapter keeps its state and stack (64 KiB each). `wasm-controller-manager
// componentize` finds it by its first bytes and gives the adapter a cabi_realloc
// that allocates in it, so that state lives among Go's static data, which Go's heap
// never covers; on pages of its own, Go's heap would overwrite it as it grows.
var adapterArena = [192 << 10]byte{'w', 'a', 's', 'm', '-', 'c', 'o', 'n', 't', 'r', 'o', 'l', 'l', 'e', 'r', '-', 'm', 'a', 'n', 'a', 'g', 'e', 'r', ':', 'a', 'd', 'a', 'p', 't', 'e', 'r', '-', 'a', 'r', 'e', 'n', 'a', ':', 'v', '1', '\x00'}

// arenaAddress keeps the arena in the binary: the linker drops data no code refers
// to, and nothing but the adapter (through the injected cabi_realloc) uses it.
var arenaAddress uintptr

func init() { arenaAddress = uintptr(unsafe.Pointer(&adapterArena)) }

// Collect runs Go's garbage collector, which a plugin otherwise never runs: call it
// between host calls in a reconcile that allocates more in total than the host's
// memory limit (--max-memory-mib) allows.
func Collect() { runtime.GC() }

// alloc returns size bytes aligned to align, kept alive until the next export call.
func alloc(size, align uint32) []byte {
	if size == 0 {
		return nil
	}
	b := make([]byte, size+align)
	off := (align - uint32(uintptr(unsafe.Pointer(&b[0])))%align) % align
	kept = append(kept, b)
	return b[off : off+size : off+size]
}

// address is where b starts in linear memory (align for an empty b, as the ABI
// wants an aligned pointer even for zero elements).
func address(b []byte, align uint32) uint32 {
	if len(b) == 0 {
		return align
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

// cabiRealloc is the allocator the host writes an import's results with and an
// export's arguments into. Exported under the two names that keep the WASI adapter
// from calling it before Go's runtime is initialised (`cabi_realloc` would be).
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if newSize == 0 {
		return unsafe.Add(nil, align)
	}
	b := alloc(newSize, align)
	if old != nil && oldSize > 0 {
		copy(b, unsafe.Slice((*byte)(old), min(oldSize, newSize)))
	}
	return unsafe.Pointer(&b[0])
}

//go:wasmexport cabi_import_realloc
func cabiImportRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	return cabiRealloc(old, oldSize, align, newSize)
}

//go:wasmexport cabi_export_realloc
func cabiExportRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	return cabiRealloc(old, oldSize, align, newSize)
}

// flatString is a string as two flat parameters: pointer and length.
func flatString(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 1, 0
	}
	b := alloc(uint32(len(s)), 1)
	copy(b, s)
	return address(b, 1), uint32(len(s))
}

// flatOption is an option<string> as three flat parameters.
func flatOption(s *string) (uint32, uint32, uint32) {
	if s == nil {
		return 0, 0, 0
	}
	p, n := flatString(*s)
	return 1, p, n
}

// memory is the n bytes at p.
func memory(p, n uint32) []byte {
	if n == 0 {
		return nil
	}
	// A linear-memory address is a Go pointer's value on wasm.
	return unsafe.Slice((*byte)(unsafe.Add(nil, p)), n)
}

// readString copies the string whose pointer and length are at b[0:8].
func readString(b []byte) string {
	p, n := u32(b[0:]), u32(b[4:])
	return string(memory(p, n))
}

// putString writes s's pointer and length at b[0:8].
func putString(b []byte, s string) {
	p, n := flatString(s)
	putU32(b[0:], p)
	putU32(b[4:], n)
}

// putOption writes an option<string> (12 bytes: tag, then the string at 4).
func putOption(b []byte, s *string) {
	if s == nil {
		b[0] = 0
		return
	}
	b[0] = 1
	putString(b[4:], *s)
}

func u32(b []byte) uint32       { return binary.LittleEndian.Uint32(b) }
func putU32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// readError reads the contract's `error` variant (12 bytes: case, then a string).
func readError(b []byte) error {
	return &Error{Case: ErrorCase(b[0]), Message: readString(b[4:])}
}

// putError writes err as the contract's `error` variant; any error that is not an
// *Error is the `other` case.
func putError(b []byte, err error) {
	e, ok := err.(*Error)
	if !ok {
		e = &Error{Case: Other, Message: err.Error()}
	}
	b[0] = byte(e.Case)
	putString(b[4:], e.Message)
}
