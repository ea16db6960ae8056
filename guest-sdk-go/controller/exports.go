//go:build wasip1

package controller

import (
	"fmt"
	"math"
	"unsafe"
)

var plugin Controller

// Export makes c the plugin; call it from an init function of package main.
func Export(c Controller) { plugin = c }

//go:wasmexport wcm:controller/reconciler@0.3.1#register
func exportRegister() unsafe.Pointer {
	kept = kept[:0]
	if plugin == nil {
		panic("controller.Export was not called from an init function")
	}
	reg := alloc(64, 8)
	writeRegistration(reg, plugin.Registration())
	return unsafe.Pointer(&reg[0])
}

// writeRegistration lays out the `registration` record (64 bytes, align 8).
func writeRegistration(b []byte, r Registration) {
	putString(b[0:], r.Name)
	putString(b[8:], r.Version)
	putList(b[16:], len(r.Watches), 96, 4, func(e []byte, i int) { writeWatch(e, r.Watches[i]) })
	putList(b[24:], len(r.Permissions), 32, 4, func(e []byte, i int) {
		writeGvk(e[0:], r.Permissions[i].Kind)
		putStrings(e[24:], r.Permissions[i].Verbs)
	})
	putU32(b[32:], r.MaxConcurrentReconciles)
	if r.ResyncPeriodMs != nil {
		b[40] = 1
		putU64(b[48:], *r.ResyncPeriodMs)
	}
	putList(b[56:], len(r.Metrics), 36, 4, func(e []byte, i int) { writeMetric(e, r.Metrics[i]) })
}

func writeGvk(b []byte, g Gvk) {
	putString(b[0:], g.Group)
	putString(b[8:], g.Version)
	putString(b[16:], g.Kind)
}

// writeWatch lays out a `watch` record (96 bytes, align 4).
func writeWatch(b []byte, w Watch) {
	writeGvk(b[0:], w.Kind)
	putStrings(b[24:], w.Namespaces)
	putOption(b[32:], w.LabelSelector)
	putOption(b[44:], w.FieldSelector)
	if w.MetadataOnly {
		b[56] = 1
	}
	putStrings(b[60:], w.Predicates)
	b[68] = w.mapsTo.tag
	switch w.mapsTo.tag {
	case 1:
		writeGvk(b[72:], w.mapsTo.owner)
	case 2:
		putString(b[72:], w.mapsTo.fixed)
	}
}

// writeMetric lays out a `metric` record (36 bytes, align 4; buckets are f64s).
func writeMetric(b []byte, m Metric) {
	putString(b[0:], m.Name)
	putString(b[8:], m.Help)
	b[16] = byte(m.Kind)
	putStrings(b[20:], m.Labels)
	putList(b[28:], len(m.Buckets), 8, 8, func(f []byte, i int) { putU64(f, math.Float64bits(m.Buckets[i])) })
}

//go:wasmexport wcm:controller/reconciler@0.3.1#reconcile
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
	// result<action, failure>: 56 bytes, the payload at 8; a failure's error at 16.
	ret := alloc(56, 8)
	if err != nil {
		ret[0] = 1
		if asError(err).Terminal {
			ret[8] = 1
		}
		putError(ret[16:], err)
		return unsafe.Pointer(&ret[0])
	}
	ret[8] = action.tag
	putU64(ret[16:], action.requeueAfterMs)
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
