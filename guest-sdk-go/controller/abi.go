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
// its garbage goes with it; Collect frees memory in a long one. In an instance the
// operator lets the host reuse, garbage piles up until the host's growth bound
// (reuse-instance-growth-mib) replaces the instance.
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

// readOption reads an option<string> (tag, then the string at 4).
func readOption(b []byte) *string {
	if b[0] == 0 {
		return nil
	}
	s := readString(b[4:])
	return &s
}

// newList lays out a new list of n elements of size bytes, each by put, and returns
// its pointer and length: the list's two flat parameters.
func newList(n int, size, align uint32, put func(elem []byte, i int)) (uint32, uint32) {
	elems := alloc(size*uint32(n), align)
	for i := 0; i < n; i++ {
		put(elems[size*uint32(i):], i)
	}
	return address(elems, align), uint32(n)
}

// putList writes at b the pointer and length of a new list (see newList).
func putList(b []byte, n int, size, align uint32, put func(elem []byte, i int)) {
	p, length := newList(n, size, align, put)
	putU32(b[0:], p)
	putU32(b[4:], length)
}

// flatStrings is a list<string> as two flat parameters; any string type (verbs,
// predicates) is laid out as its text.
func flatStrings[S ~string](list []S) (uint32, uint32) {
	return newList(len(list), 8, 4, func(e []byte, i int) { putString(e, string(list[i])) })
}

// putStrings writes a list<string> at b.
func putStrings[S ~string](b []byte, list []S) {
	p, n := flatStrings(list)
	putU32(b[0:], p)
	putU32(b[4:], n)
}

// flatPairs is a list<tuple<string, string>> as two flat parameters.
func flatPairs(pairs [][2]string) (uint32, uint32) {
	return newList(len(pairs), 16, 4, func(e []byte, i int) {
		putString(e[0:], pairs[i][0])
		putString(e[8:], pairs[i][1])
	})
}

// readStrings reads a list<string> whose pointer and length are at b[0:8].
func readStrings(b []byte) []string {
	n := u32(b[4:])
	items := memory(u32(b[0:]), 8*n)
	out := make([]string, 0, n)
	for i := uint32(0); i < n; i++ {
		out = append(out, readString(items[8*i:]))
	}
	return out
}

func u32(b []byte) uint32       { return binary.LittleEndian.Uint32(b) }
func putU32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func u64(b []byte) uint64       { return binary.LittleEndian.Uint64(b) }
func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// The contract's `error` record (40 bytes, align 8): code at 0, message at 4, status
// (option<u16>) at 12, retry-after-ms (option<u64>) at 16, causes at 32; a `cause`
// is 36 bytes: field, reason, message, then manager (option<string>) at 24.
const (
	errorSize = 40
	causeSize = 36
)

// readError reads the contract's `error`.
func readError(b []byte) error {
	e := &Error{Case: ErrorCase(b[0]), Message: readString(b[4:])}
	if b[12] == 1 {
		status := binary.LittleEndian.Uint16(b[14:])
		e.Status = &status
	}
	if b[16] == 1 {
		retry := u64(b[24:])
		e.RetryAfterMs = &retry
	}
	n := u32(b[36:])
	causes := memory(u32(b[32:]), causeSize*n)
	for i := uint32(0); i < n; i++ {
		c := causes[causeSize*i:]
		e.Causes = append(e.Causes, Cause{readString(c[0:]), readString(c[8:]), readString(c[16:]), readOption(c[24:])})
	}
	return e
}

// putError writes err as the contract's `error`; an error that is not an *Error is
// the `other` case.
func putError(b []byte, err error) {
	e := asError(err)
	b[0] = byte(e.Case)
	putString(b[4:], e.Message)
	if e.Status != nil {
		b[12] = 1
		binary.LittleEndian.PutUint16(b[14:], *e.Status)
	}
	if e.RetryAfterMs != nil {
		b[16] = 1
		putU64(b[24:], *e.RetryAfterMs)
	}
	putList(b[32:], len(e.Causes), causeSize, 4, func(c []byte, i int) {
		cause := e.Causes[i]
		putString(c[0:], cause.Field)
		putString(c[8:], cause.Reason)
		putString(c[16:], cause.Message)
		putOption(c[24:], cause.Manager)
	})
}
