//go:build wasip1

package controller

import (
	"fmt"
	"unsafe"
)

var plugin Controller

// Export makes c the plugin; call it from an init function of package main.
func Export(c Controller) { plugin = c }

//go:wasmexport wcm:controller/reconciler@0.2.0#register
func exportRegister() unsafe.Pointer {
	kept = kept[:0]
	if plugin == nil {
		panic("controller.Export was not called from an init function")
	}
	reg := alloc(56, 8)
	writeRegistration(reg, plugin.Registration())
	return unsafe.Pointer(&reg[0])
}

// writeRegistration lays out the `registration` record (56 bytes, align 8).
func writeRegistration(b []byte, r Registration) {
	putString(b[0:], r.Name)
	putString(b[8:], r.Version)
	watches := alloc(uint32(76*len(r.Watches)), 4)
	for i, w := range r.Watches {
		writeWatch(watches[76*i:], w)
	}
	putU32(b[16:], address(watches, 4))
	putU32(b[20:], uint32(len(r.Watches)))
	permissions := alloc(uint32(32*len(r.Permissions)), 4)
	for i, p := range r.Permissions {
		writePermission(permissions[32*i:], p)
	}
	putU32(b[24:], address(permissions, 4))
	putU32(b[28:], uint32(len(r.Permissions)))
	putU32(b[32:], r.MaxConcurrentReconciles)
	if r.ResyncPeriodMs != nil {
		b[40] = 1
		putU64(b[48:], *r.ResyncPeriodMs)
	}
}

func writeGvk(b []byte, g Gvk) {
	putString(b[0:], g.Group)
	putString(b[8:], g.Version)
	putString(b[16:], g.Kind)
}

// writeWatch lays out a `watch` record (76 bytes, align 4).
func writeWatch(b []byte, w Watch) {
	writeGvk(b[0:], w.Kind)
	putOption(b[24:], w.Namespace)
	putOption(b[36:], w.LabelSelector)
	b[48] = w.mapsTo.tag
	switch w.mapsTo.tag {
	case 1:
		writeGvk(b[52:], w.mapsTo.owner)
	case 2:
		putString(b[52:], w.mapsTo.fixed)
	}
}

// writePermission lays out a `permission` record (32 bytes, align 4).
func writePermission(b []byte, p Permission) {
	writeGvk(b[0:], p.Kind)
	verbs := alloc(uint32(len(p.Verbs)), 1)
	for i, v := range p.Verbs {
		verbs[i] = byte(v)
	}
	putU32(b[24:], address(verbs, 1))
	putU32(b[28:], uint32(len(p.Verbs)))
}

//go:wasmexport wcm:controller/reconciler@0.2.0#reconcile
func exportReconcile(kindTag, g, gn, v, vn, k, kn, nsTag, ns, nsn, name, namen uint32) unsafe.Pointer {
	kept = kept[:0]
	req := Request{Name: string(memory(name, namen))}
	if kindTag == 1 {
		kind := Gvk{string(memory(g, gn)), string(memory(v, vn)), string(memory(k, kn))}
		req.Kind = &kind
	}
	if nsTag == 1 {
		namespace := string(memory(ns, nsn))
		req.Namespace = &namespace
	}
	action, err := reconcileSafely(req)
	ret := alloc(24, 8)
	if err != nil {
		ret[0] = 1
		putError(ret[8:], err)
	} else if action.requeueAfterMs != nil {
		ret[8] = 1
		putU64(ret[16:], *action.requeueAfterMs)
	}
	return unsafe.Pointer(&ret[0])
}

// reconcileSafely turns a panic into an error naming it, as a failed reconcile the
// host retries, rather than a trap.
func reconcileSafely(req Request) (action Action, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Case: Other, Message: fmt.Sprintf("panic: %v", r)}
		}
	}()
	return plugin.Reconcile(req)
}
