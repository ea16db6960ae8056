//go:build wasip1

package controller

import "unsafe"

//go:wasmimport wcm:controller/cluster@0.3.1 patch-labels
func hostPatchLabels(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, set, setn, remove, removen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 patch-finalizers
func hostPatchFinalizers(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, add, addn, remove, removen uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 record-event
func hostRecordEvent(params, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 apply
func hostApply(object, objectn, force uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 patch-status
func hostPatchStatus(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, status, statusn uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 create
func hostCreate(object, objectn uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 patch
func hostPatch(params, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 update
func hostUpdate(object, objectn uint32, ret unsafe.Pointer)

//go:wasmimport wcm:controller/cluster@0.3.1 delete
func hostDelete(params, ret unsafe.Pointer)

// PatchLabels sets the labels of set and removes those of remove, as the plugin's
// field manager; needs VerbPatch.
func PatchLabels(ref ObjectRef, set map[string]string, remove []string) error {
	pairs := make([][2]string, 0, len(set))
	for _, key := range sortedKeys(set) {
		pairs = append(pairs, [2]string{key, set[key]})
	}
	s, sn := flatPairs(pairs)
	return listsOn(hostPatchLabels, ref, s, sn, remove)
}

// PatchFinalizers adds and removes finalizers, leaving other controllers' alone (the
// host guards the write with the object's resourceVersion and tries again on a
// conflict); needs VerbPatch.
func PatchFinalizers(ref ObjectRef, add, remove []string) error {
	a, an := flatStrings(add)
	return listsOn(hostPatchFinalizers, ref, a, an, remove)
}

// listsImport is the shape of the imports that change two lists on one object:
// the object, what to add or set (flattened) and the keys to remove.
type listsImport func(g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen, set, setn, remove, removen uint32, ret unsafe.Pointer)

// listsOn calls host on ref with set (already flattened) and remove.
func listsOn(host listsImport, ref ObjectRef, set, setn uint32, remove []string) error {
	r, rn := flatStrings(remove)
	f, ret := flatten(ref), resultArea()
	host(f.g, f.gn, f.v, f.vn, f.k, f.kn, f.nsTag, f.ns, f.nsn, f.name, f.namen,
		set, setn, r, rn, unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}

// Record records e (an `event` record: 120 bytes, passed in memory).
func Record(e Event) error {
	params, ret := alloc(120, 4), resultArea()
	putRef(params[0:], e.Regarding)
	if e.Related != nil {
		params[44] = 1
		putRef(params[48:], *e.Related)
	}
	params[92] = byte(e.Type)
	putString(params[96:], e.Reason)
	putString(params[104:], e.Action)
	putString(params[112:], e.Note)
	hostRecordEvent(unsafe.Pointer(&params[0]), unsafe.Pointer(&ret[0]))
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

// CreateJSON creates object (named, or with metadata.generateName); returns the
// stored object; AlreadyExists if the name is taken. Needs VerbCreate.
func CreateJSON(object string) (string, error) {
	p, n := flatString(object)
	ret := resultArea()
	hostCreate(p, n, unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// UpdateJSON replaces an object read earlier (it carries metadata.resourceVersion);
// Conflict if it changed since. Needs VerbUpdate.
func UpdateJSON(object string) (string, error) {
	p, n := flatString(object)
	ret := resultArea()
	hostUpdate(p, n, unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// PatchRaw patches ref (subresource "" for the object, or "status" or "scale") with
// patch, a merge patch or a JSON patch as text; returns what is stored. Needs
// VerbPatch, VerbPatchStatus or VerbPatchScale.
func PatchRaw(ref ObjectRef, kind PatchType, patch string, subresource string) (string, error) {
	// The parameters (68 bytes): obj at 0, kind at 44, patch at 48, subresource at 56.
	params, ret := alloc(68, 4), resultArea()
	putRef(params[0:], ref)
	params[44] = byte(kind)
	putString(params[48:], patch)
	if subresource != "" {
		putOption(params[56:], &subresource)
	}
	hostPatch(unsafe.Pointer(&params[0]), unsafe.Pointer(&ret[0]))
	return stringResult(ret)
}

// DeleteIf deletes ref with options (the parameters, 72 bytes: obj at 0, options at
// 44: propagation, then uid and resource-version options at 48 and 60).
func DeleteIf(ref ObjectRef, options DeleteOptions) error {
	params, ret := alloc(72, 4), resultArea()
	putRef(params[0:], ref)
	params[44] = byte(options.Propagation)
	putOption(params[48:], options.UID)
	putOption(params[60:], options.ResourceVersion)
	hostDelete(unsafe.Pointer(&params[0]), unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}
