// Package controller is the Go SDK for wasm-controller-manager plugins: implement
// [Controller], call [Export] from an init function, build with
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` and make the result a plugin
// with `wasm-controller-manager componentize`. The host calls Registration once, then
// Reconcile with one key at a time, each time in a fresh instance: keep no state
// between calls, read the current state through the cluster functions ([Get], [List]).
//
// The SDK implements contract 0.3 (`wit/controller.wit`).
package controller

// Gvk is an API group, version and kind ("" is the core group).
type Gvk struct {
	Group, Version, Kind string
}

// Well-known kinds.
var (
	Pod         = Gvk{"", "v1", "Pod"}
	Node        = Gvk{"", "v1", "Node"}
	ConfigMap   = Gvk{"", "v1", "ConfigMap"}
	Secret      = Gvk{"", "v1", "Secret"}
	Service     = Gvk{"", "v1", "Service"}
	Namespace   = Gvk{"", "v1", "Namespace"}
	Deployment  = Gvk{"apps", "v1", "Deployment"}
	StatefulSet = Gvk{"apps", "v1", "StatefulSet"}
	DaemonSet   = Gvk{"apps", "v1", "DaemonSet"}
	ReplicaSet  = Gvk{"apps", "v1", "ReplicaSet"}
	Job         = Gvk{"batch", "v1", "Job"}
)

// ObjectRef names one object.
type ObjectRef struct {
	Kind Gvk
	// Namespace is nil for cluster-scoped kinds.
	Namespace *string
	Name      string
}

// Ref names the object of kind in namespace ("" for cluster-scoped) called name.
func Ref(kind Gvk, namespace, name string) ObjectRef {
	ref := ObjectRef{Kind: kind, Name: name}
	if namespace != "" {
		ref.Namespace = &namespace
	}
	return ref
}

// EventType is Normal or Warning.
type EventType uint8

// The event types.
const (
	Normal EventType = iota
	Warning
)

// Propagation is how a deletion treats dependents.
type Propagation uint8

// The propagation policies.
const (
	Background Propagation = iota
	Foreground
	Orphan
)

// PatchType is how the host applies a patch.
type PatchType uint8

// The patch types.
const (
	// MergePatchType is an RFC 7386 JSON merge patch (an object; null removes a
	// field).
	MergePatchType PatchType = iota
	// JSONPatchType is an RFC 6902 JSON patch (a list of operations; `test` guards).
	JSONPatchType
)

// Request is the key a reconcile is for.
type Request struct {
	// Kind is nil for a fixed key.
	Kind      *Gvk
	Namespace *string
	Name      string
}

// Object is the object the request names, if it is not a fixed key.
func (r Request) Object() (ObjectRef, bool) {
	if r.Kind == nil {
		return ObjectRef{}, false
	}
	return ObjectRef{Kind: *r.Kind, Namespace: r.Namespace, Name: r.Name}, true
}

// Action is what the host should do with the key after a successful reconcile.
type Action struct {
	tag            uint8 // 0 done, 1 requeue after, 2 requeue
	requeueAfterMs uint64
}

// Done: nothing more until something changes.
func Done() Action { return Action{} }

// RequeueAfter reconciles the key again after ms milliseconds (an earlier change
// still wakes it).
func RequeueAfter(ms uint64) Action { return Action{tag: 1, requeueAfterMs: ms} }

// Requeue reconciles the key again after its backoff, without an error ("not ready
// yet"); repeated requeues back off as failures do.
func Requeue() Action { return Action{tag: 2} }

// Controller is a plugin.
type Controller interface {
	Registration() Registration
	// Reconcile brings the key's object to its wanted state. An error is logged and
	// retried with backoff; one made with [Terminal] is recorded and not retried
	// until the key is queued again.
	Reconcile(req Request) (Action, error)
}
