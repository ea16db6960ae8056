//go:build wasip1

package controller

import (
	"encoding/json"
	"unsafe"
)

//go:wasmimport wcm:controller/cluster@0.2.0 get
func hostGet(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 list
func hostList(g, gn, v, vn, k, kn, nsTag, ns, nsn, selTag, sel, seln uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 patch-labels
func hostPatchLabels(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, set, setn, remove, removen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 record-event
func hostRecordEvent(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, typ, reason, reasonn, note, noten uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 apply
func hostApply(object, objectn, force uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 patch-status
func hostPatchStatus(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, status, statusn uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.2.0 delete
func hostDelete(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, propagation uint32, ret unsafe.Pointer)

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

// resultArea is the 16-byte return area of a result<T, error> with a 4-aligned T.
func resultArea() []byte { return alloc(16, 4) }

// unitResult reads a result<_, error>.
func unitResult(ret []byte) error {
	if ret[0] == 0 {
		return nil
	}
	return readError(ret[4:])
}

// stringResult reads a result<string, error>.
func stringResult(ret []byte) (string, error) {
	if ret[0] == 0 {
		return readString(ret[4:]), nil
	}
	return "", readError(ret[4:])
}

// GetJSON is the JSON of a watched object, from the host's cache.
func GetJSON(ref ObjectRef) (string, error) {
	f, ret := flatten(ref), resultArea()
	hostGet(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen, unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// Get decodes a watched object into T (a struct with the fields you need, or
// map[string]any).
func Get[T any](ref ObjectRef) (T, error) {
	var out T
	text, err := GetJSON(ref)
	if err != nil {
		return out, err
	}
	return out, decode(text, &out)
}

// ListJSON is the JSON of every cached object of kind in namespace (nil: all)
// matching selector (nil: all).
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
		return nil, readError(ret[4:])
	}
	items := memory(u32(ret[4:]), 8*u32(ret[8:]))
	out := make([]string, 0, len(items)/8)
	for i := 0; i < len(items); i += 8 {
		out = append(out, readString(items[i:]))
	}
	return out, nil
}

// List decodes every cached object of kind in namespace (nil: all) matching
// selector (nil: all) into T.
func List[T any](kind Gvk, namespace, selector *string) ([]T, error) {
	texts, err := ListJSON(kind, namespace, selector)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(texts))
	for i, text := range texts {
		if err := decode(text, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decode(text string, out any) error {
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return &Error{Case: Invalid, Message: "unexpected JSON from the host: " + err.Error()}
	}
	return nil
}

// PatchLabels sets the labels of set and removes those of remove, as the plugin's
// field manager; needs the `patch` verb.
func PatchLabels(ref ObjectRef, set map[string]string, remove []string) error {
	pairs := alloc(uint32(16*len(set)), 4)
	i := 0
	for key, value := range set {
		putString(pairs[16*i:], key)
		putString(pairs[16*i+8:], value)
		i++
	}
	removed := alloc(uint32(8*len(remove)), 4)
	for i, key := range remove {
		putString(removed[8*i:], key)
	}
	f, ret := flatten(ref), resultArea()
	hostPatchLabels(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen,
		address(pairs, 4), uint32(len(set)), address(removed, 4), uint32(len(remove)), unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}

// RecordEvent records an Event about ref (a watched or declared kind).
func RecordEvent(ref ObjectRef, typ EventType, reason, note string) error {
	r, rn := flatString(reason)
	n, nn := flatString(note)
	f, ret := flatten(ref), resultArea()
	hostRecordEvent(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen,
		uint32(typ), r, rn, n, nn, unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}

// ApplyJSON server-side applies object (JSON with apiVersion, kind and metadata) as
// the plugin's field manager; returns the stored object.
func ApplyJSON(object string, force bool) (string, error) {
	p, n := flatString(object)
	forced := uint32(0)
	if force {
		forced = 1
	}
	ret := resultArea()
	hostApply(p, n, forced, unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// PatchStatus merges status (JSON) into ref's status subresource.
func PatchStatus(ref ObjectRef, status string) error {
	s, sn := flatString(status)
	f, ret := flatten(ref), resultArea()
	hostPatchStatus(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen, s, sn, unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}

// Delete deletes ref.
func Delete(ref ObjectRef, propagation Propagation) error {
	f, ret := flatten(ref), resultArea()
	hostDelete(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen, uint32(propagation), unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}
