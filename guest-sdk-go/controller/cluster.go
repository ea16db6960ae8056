//go:build wasip1

package controller

import "unsafe"

//go:wasmimport wcm:controller/cluster@0.3.0 get
func hostGet(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.0 list
func hostList(g, gn, v, vn, k, kn, nsTag, ns, nsn, selTag, sel, seln uint32, ret unsafe.Pointer)

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
	var f flatRef
	f.g, f.gn = flatString(kind.Group)
	f.v, f.vn = flatString(kind.Version)
	f.k, f.kn = flatString(kind.Kind)
	f.nsTag, f.ns, f.nsn = flatOption(namespace)
	selTag, sel, seln := flatOption(selector)
	ret := resultArea()
	hostList(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, selTag, sel, seln, unsafe.Pointer(&ret[0]))
	if ret[0] != 0 {
		return nil, readError(ret[8:])
	}
	return readStrings(ret[8:]), nil
}
