package controller

// Verb is a right a plugin declares on a kind beyond reading what it watches, as the
// contract spells it.
type Verb string

// The verbs the host knows.
const (
	VerbGet         Verb = "get"
	VerbList        Verb = "list"
	VerbPatch       Verb = "patch"
	VerbApply       Verb = "apply"
	VerbPatchStatus Verb = "patch/status"
	VerbPatchScale  Verb = "patch/scale"
	VerbDelete      Verb = "delete"
	VerbCreate      Verb = "create"
	VerbUpdate      Verb = "update"
)

// Predicate is a filter the host applies to a watch's updates before a key is
// queued; creates, deletes, relists and resyncs always pass.
type Predicate string

// The predicates the host knows (a watch passes an update if any of its own do).
const (
	GenerationChanged  Predicate = "generation-changed"
	LabelsChanged      Predicate = "labels-changed"
	AnnotationsChanged Predicate = "annotations-changed"
	FinalizersChanged  Predicate = "finalizers-changed"
	DeletionStarted    Predicate = "deletion-started"
)

// mapping is which key a change of a watched object wakes.
type mapping struct {
	tag   uint8 // 0 object, 1 controller owner, 2 fixed
	owner Gvk
	fixed string
}

// Watch is one watch of a registration.
type Watch struct {
	Kind Gvk
	// Namespaces limits the watch (none: every namespace the plugin may read).
	Namespaces    []string
	LabelSelector *string
	FieldSelector *string
	// MetadataOnly holds only apiVersion, kind and metadata of each object.
	MetadataOnly bool
	Predicates   []Predicate
	mapsTo       mapping
}

// WatchAll watches every object of kind, each mapped to its own key.
func WatchAll(kind Gvk) Watch { return Watch{Kind: kind} }

// InNamespace limits the watch to these namespaces (one informer each).
func (w Watch) InNamespace(namespaces ...string) Watch {
	w.Namespaces = append(append([]string(nil), w.Namespaces...), namespaces...)
	return w
}

// Labels limits the watch to objects matching a label selector (`app=web`).
func (w Watch) Labels(selector string) Watch {
	w.LabelSelector = &selector
	return w
}

// Fields limits the watch to objects matching a field selector
// (`spec.nodeName=n1`), as the API server supports them for the kind.
func (w Watch) Fields(selector string) Watch {
	w.FieldSelector = &selector
	return w
}

// Metadata holds only each object's metadata (names, labels, annotations, owners):
// a much smaller cache when the plugin reads nothing else.
func (w Watch) Metadata() Watch {
	w.MetadataOnly = true
	return w
}

// When queues an update only if one of the predicates holds (a plugin's own status
// write does not wake it with GenerationChanged).
func (w Watch) When(predicates ...Predicate) Watch {
	w.Predicates = append(append([]Predicate(nil), w.Predicates...), predicates...)
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

// MetricKind is what a plugin metric is.
type MetricKind uint8

// The metric kinds.
const (
	Counter MetricKind = iota
	Gauge
	Histogram
)

// Metric is one metric a plugin declares; the host exports it as
// `wcm_plugin_<plugin>_<name>` with the plugin's label.
type Metric struct {
	Name, Help string
	Kind       MetricKind
	Labels     []string
	// Buckets are a histogram's upper bounds (none: the host's 5 ms-10 s).
	Buckets []float64
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
	Metrics        []Metric
}

// NewRegistration starts a registration; name must be a DNS-1123 label.
func NewRegistration(name, version string) Registration {
	return Registration{Name: name, Version: version}
}

// Watch adds a watch.
func (r Registration) Watch(w Watch) Registration {
	r.Watches = append(append([]Watch(nil), r.Watches...), w)
	return r
}

// Permit declares verbs on a kind.
func (r Registration) Permit(kind Gvk, verbs ...Verb) Registration {
	p := Permission{Kind: kind, Verbs: verbs}
	r.Permissions = append(append([]Permission(nil), r.Permissions...), p)
	return r
}

// Counter declares a counter (a name without `_total`) with these labels.
func (r Registration) Counter(name, help string, labels ...string) Registration {
	return r.metric(Metric{Name: name, Help: help, Kind: Counter, Labels: labels})
}

// Gauge declares a gauge with these labels.
func (r Registration) Gauge(name, help string, labels ...string) Registration {
	return r.metric(Metric{Name: name, Help: help, Kind: Gauge, Labels: labels})
}

// Histogram declares a histogram with these buckets (nil: the host's) and labels.
func (r Registration) Histogram(name, help string, buckets []float64, labels ...string) Registration {
	return r.metric(Metric{Name: name, Help: help, Kind: Histogram, Labels: labels, Buckets: buckets})
}

func (r Registration) metric(m Metric) Registration {
	r.Metrics = append(append([]Metric(nil), r.Metrics...), m)
	return r
}
