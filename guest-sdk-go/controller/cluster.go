//go:build wasip1

package controller

import "unsafe"

//go:wasmimport wcm:controller/cluster@0.3.1 get
func hostGet(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 list
func hostList(g, gn, v, vn, k, kn, nsTag, ns, nsn, selTag, sel, seln uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 count
func hostCount(g, gn, v, vn, k, kn, nsTag, ns, nsn, selTag, sel, seln uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 list-first
func hostListFirst(g, gn, v, vn, k, kn, nsTag, ns, nsn, selTag, sel, seln, limit uint32, ret unsafe.Pointer)

// flatRef is an object-ref as its 11 flat parameters.
type flatRef struct{ g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen uint32 }

func flatten(r ObjectRef) flatRef {
	var f flatRef
	f.g, f.gn = flatString(r.Kind.Group)
	f.v, f.vn = flatString(r.Kind.Version)
	f.k, f.kn = flatString(r.Kind.Kind)
	f.nsTag, f.ns, f.nsn = flatOption(r.Namespace)
	f.name, f.namen = flatString(r.Name)
	return f
}

// putRef lays out an `object-ref` record (44 bytes, align 4), for the calls whose
// parameters the ABI passes in memory (more than 16 flat values).
func putRef(b []byte, r ObjectRef) {
	writeGvk(b[0:], r.Kind)
	putOption(b[24:], r.Namespace)
	putString(b[36:], r.Name)
}

// resultArea is the return area of a result<T, error>: 48 bytes, align 8, the tag at
// 0 and the payload (T or the 40-byte error) at 8.
func resultArea() []byte { return alloc(48, 8) }

// unitResult reads a result<_, error>.
func unitResult(ret []byte) error {
	if ret[0] == 0 {
		return nil
	}
	return readError(ret[8:])
}

// stringResult reads a result<string, error>.
func stringResult(ret []byte) (string, error) {
	if ret[0] == 0 {
		return readString(ret[8:]), nil
	}
	return "", readError(ret[8:])
}

// GetJSON is the JSON of one object: of a watched kind from the host's cache; of a
// kind declared with VerbGet but not watched, live from the API server.
func GetJSON(ref ObjectRef) (string, error) {
	f, ret := flatten(ref), resultArea()
	hostGet(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen, unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// ListJSON is the JSON of every cached object of kind in namespace (nil: all)
// matching selector (nil: all), sorted by namespace and name.
func ListJSON(kind Gvk, namespace, selector *string) ([]string, error) {
	f, ret := flatScope(kind, namespace, selector), resultArea()
	hostList(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.selTag, f.sel, f.seln, unsafe.Pointer(&ret[0]))
	return stringsResult(ret)
}

// ListFirstJSON is the JSON of the first limit objects ListJSON would return: a batch
// out of thousands, the rest never copied into the plugin. Ask for one more than the
// batch to learn whether more remain.
func ListFirstJSON(kind Gvk, namespace, selector *string, limit uint32) ([]string, error) {
	f, ret := flatScope(kind, namespace, selector), resultArea()
	hostListFirst(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.selTag, f.sel, f.seln, limit, unsafe.Pointer(&ret[0]))
	return stringsResult(ret)
}

// Count is how many objects ListJSON would return, counted by the host: nothing is
// copied into the plugin or decoded.
func Count(kind Gvk, namespace, selector *string) (uint64, error) {
	f, ret := flatScope(kind, namespace, selector), resultArea()
	hostCount(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.selTag, f.sel, f.seln, unsafe.Pointer(&ret[0]))
	if ret[0] != 0 {
		return 0, readError(ret[8:])
	}
	return u64(ret[8:]), nil
}

// scopeArgs is a kind, namespace and selector as their 12 flat parameters.
type scopeArgs struct {
	flatRef
	selTag, sel, seln uint32
}

// flatScope lays out the parameters of list, list-first and count.
func flatScope(kind Gvk, namespace, selector *string) scopeArgs {
	var f scopeArgs
	f.g, f.gn = flatString(kind.Group)
	f.v, f.vn = flatString(kind.Version)
	f.k, f.kn = flatString(kind.Kind)
	f.nsTag, f.ns, f.nsn = flatOption(namespace)
	f.selTag, f.sel, f.seln = flatOption(selector)
	return f
}

// stringsResult reads a result<list<string>, error>.
func stringsResult(ret []byte) ([]string, error) {
	if ret[0] != 0 {
		return nil, readError(ret[8:])
	}
	return readStrings(ret[8:]), nil
}
