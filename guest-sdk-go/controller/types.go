// Package controller is the Go SDK for wasm-controller-manager plugins: implement
// [Controller], call [Export] from an init function, build with
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` and make the result a plugin
// with `wasm-controller-manager componentize`. The host calls Registration once, then
// Reconcile with one key at a time, each time in a fresh instance: keep no state
// between calls, read the current state through the cluster functions ([Get], [List]).
package controller

import "fmt"

// Gvk is an API group, version and kind ("" is the core group).
type Gvk struct {
	Group, Version, Kind string
}

// Well-known kinds.
var (
	Pod        = Gvk{"", "v1", "Pod"}
	Node       = Gvk{"", "v1", "Node"}
	ConfigMap  = Gvk{"", "v1", "ConfigMap"}
	Secret     = Gvk{"", "v1", "Secret"}
	Service    = Gvk{"", "v1", "Service"}
	Namespace  = Gvk{"", "v1", "Namespace"}
	Deployment = Gvk{"apps", "v1", "Deployment"}
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

// ErrorCase is the kind of failure the host reports.
type ErrorCase uint8

// The cases of the contract's `error`, in its order.
const (
	NotFound ErrorCase = iota
	Forbidden
	Conflict
	Invalid
	Unavailable
	Other
)

var caseNames = [...]string{"not-found", "forbidden", "conflict", "invalid", "unavailable", "other"}

// Error is a failure of a cluster call, or a reconcile's own failure.
type Error struct {
	Case    ErrorCase
	Message string
}

func (e *Error) Error() string {
	name := "unknown"
	if int(e.Case) < len(caseNames) {
		name = caseNames[e.Case]
	}
	return fmt.Sprintf("%s: %s", name, e.Message)
}

// IsNotFound says whether err is the host's not-found: usually "it was deleted,
// nothing to do".
func IsNotFound(err error) bool { return hasCase(err, NotFound) }

// IsForbidden says whether RBAC (or an admission rule) refused the call.
func IsForbidden(err error) bool { return hasCase(err, Forbidden) }

// IsConflict says whether a write conflicted with someone else's.
func IsConflict(err error) bool { return hasCase(err, Conflict) }

func hasCase(err error, c ErrorCase) bool {
	e, ok := err.(*Error)
	return ok && e.Case == c
}

// EventType is Normal or Warning.
type EventType uint8

// The event types.
const (
	Normal EventType = iota
	Warning
)

// Verb is a right a plugin declares on a kind beyond reading what it watches.
type Verb uint8

// The verbs, in the contract's order.
const (
	VerbGet Verb = iota
	VerbList
	VerbPatch
	VerbApply
	VerbPatchStatus
	VerbDelete
)

// Propagation is how a deletion treats dependents.
type Propagation uint8

// The propagation policies.
const (
	Background Propagation = iota
	Foreground
	Orphan
)

// mapping is which key a change of a watched object wakes.
type mapping struct {
	tag   uint8 // 0 object, 1 controller owner, 2 fixed
	owner Gvk
	fixed string
}

// Watch is one watch of a registration.
type Watch struct {
	Kind          Gvk
	Namespace     *string
	LabelSelector *string
	mapsTo        mapping
}

// WatchAll watches every object of kind, each mapped to its own key.
func WatchAll(kind Gvk) Watch { return Watch{Kind: kind} }

// InNamespace limits the watch to one namespace.
func (w Watch) InNamespace(namespace string) Watch {
	w.Namespace = &namespace
	return w
}

// Labels limits the watch to objects matching a label selector (`app=web`).
func (w Watch) Labels(selector string) Watch {
	w.LabelSelector = &selector
	return w
}

// FixedKey makes every change wake the one key `key` (for aggregates).
func (w Watch) FixedKey(key string) Watch {
	w.mapsTo = mapping{tag: 2, fixed: key}
	return w
}

// OwnedBy makes a change wake the object's controller owner of kind owner.
func (w Watch) OwnedBy(owner Gvk) Watch {
	w.mapsTo = mapping{tag: 1, owner: owner}
	return w
}

// Permission is a set of verbs on a kind.
type Permission struct {
	Kind  Gvk
	Verbs []Verb
}

// Registration is what a plugin tells the host about itself.
type Registration struct {
	Name, Version string
	Watches       []Watch
	Permissions   []Permission
	// MaxConcurrentReconciles is the plugin's wish (0: the host's default).
	MaxConcurrentReconciles uint32
	// ResyncPeriodMs re-queues every watched object this often if set.
	ResyncPeriodMs *uint64
}

// NewRegistration starts a registration; name must be a DNS-1123 label.
func NewRegistration(name, version string) Registration {
	return Registration{Name: name, Version: version}
}

// Watch adds a watch.
func (r Registration) Watch(w Watch) Registration {
	r.Watches = append(r.Watches, w)
	return r
}

// Permit declares verbs on a kind.
func (r Registration) Permit(kind Gvk, verbs ...Verb) Registration {
	r.Permissions = append(r.Permissions, Permission{Kind: kind, Verbs: verbs})
	return r
}

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
	requeueAfterMs *uint64
}

// Done: nothing more until something changes.
func Done() Action { return Action{} }

// RequeueAfter reconciles the key again after ms milliseconds.
func RequeueAfter(ms uint64) Action { return Action{requeueAfterMs: &ms} }

// Controller is a plugin.
type Controller interface {
	Registration() Registration
	Reconcile(req Request) (Action, error)
}
