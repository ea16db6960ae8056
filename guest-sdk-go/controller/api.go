package controller

import (
	"encoding/json"
	"sort"
)

// Event is an Event about an object, in the events.k8s.io/v1 shape.
type Event struct {
	// Regarding is the object the Event is about (a watched or declared kind).
	Regarding ObjectRef
	// Related is a second object the action involved, if any.
	Related *ObjectRef
	Type    EventType
	// Reason is why (PascalCase, `Counted`); Action what the plugin did (PascalCase;
	// "" is `Reconcile`); Note the human-readable text.
	Reason, Action, Note string
}

// DeleteOptions are a deletion's propagation and preconditions.
type DeleteOptions struct {
	Propagation Propagation
	// UID, if set, deletes only the object with this uid (not a successor of the
	// same name): Conflict otherwise.
	UID *string
	// ResourceVersion, if set, deletes only if the object has not changed since.
	ResourceVersion *string
}

// RecordEvent records an Event about ref (a watched or declared kind).
func RecordEvent(ref ObjectRef, typ EventType, reason, note string) error {
	return Record(Event{Regarding: ref, Type: typ, Reason: reason, Note: note})
}

// Delete deletes ref; NotFound if it is gone already.
func Delete(ref ObjectRef, propagation Propagation) error {
	return DeleteIf(ref, DeleteOptions{Propagation: propagation})
}

// Get decodes one object (see [GetJSON]) into T: a struct with the fields you need,
// map[string]any, or a k8s.io/api type.
func Get[T any](ref ObjectRef) (T, error) {
	var out T
	text, err := GetJSON(ref)
	if err != nil {
		return out, err
	}
	return out, decode(text, &out)
}

// List decodes every cached object of kind in namespace (nil: all) matching
// selector (nil: all) into T.
func List[T any](kind Gvk, namespace, selector *string) ([]T, error) {
	return decodeAll[T](ListJSON(kind, namespace, selector))
}

// ListFirst decodes the first limit objects List would return (see [ListFirstJSON]).
func ListFirst[T any](kind Gvk, namespace, selector *string, limit uint32) ([]T, error) {
	return decodeAll[T](ListFirstJSON(kind, namespace, selector, limit))
}

// decodeAll decodes listed objects into T.
func decodeAll[T any](texts []string, err error) ([]T, error) {
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

// Create creates object (see [CreateJSON]) and decodes the stored object into T.
func Create[T any](object T) (T, error) {
	return roundTrip(object, CreateJSON)
}

// Update replaces an object read earlier (see [UpdateJSON]) and decodes the stored
// object into T.
func Update[T any](object T) (T, error) {
	return roundTrip(object, UpdateJSON)
}

// Apply server-side applies object (see [ApplyJSON]) and decodes the stored object.
func Apply[T any](object T, force bool) (T, error) {
	return roundTrip(object, func(text string) (string, error) { return ApplyJSON(text, force) })
}

// MergePatch merge-patches the object ref names with patch (a map or struct; nil
// values remove fields); a metadata.resourceVersion in it makes the patch
// conditional (Conflict). Returns the stored object's JSON.
func MergePatch(ref ObjectRef, patch any) (string, error) {
	text, err := encode(patch)
	if err != nil {
		return "", err
	}
	return PatchRaw(ref, MergePatchType, text, "")
}

// JSONPatch applies RFC 6902 operations to the object ref names; a failed `test`
// operation is Invalid and changes nothing. Returns the stored object's JSON.
func JSONPatch(ref ObjectRef, ops ...PatchOp) (string, error) {
	text, err := encode(ops)
	if err != nil {
		return "", err
	}
	return PatchRaw(ref, JSONPatchType, text, "")
}

// PatchOp is one operation of a JSON patch (`add`, `remove`, `replace`, `test`, ...).
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

// roundTrip encodes object, calls write and decodes its answer into a new T.
func roundTrip[T any](object T, write func(string) (string, error)) (T, error) {
	var out T
	text, err := encode(object)
	if err != nil {
		return out, err
	}
	stored, err := write(text)
	if err != nil {
		return out, err
	}
	return out, decode(stored, &out)
}

func encode(v any) (string, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return "", &Error{Case: Invalid, Message: "cannot encode as JSON: " + err.Error()}
	}
	return string(text), nil
}

func decode(text string, out any) error {
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return &Error{Case: Invalid, Message: "unexpected JSON from the host: " + err.Error()}
	}
	return nil
}

// sortedKeys are m's keys in order, so a call's arguments do not depend on Go's
// random map order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Finalize is the usual finalizer pattern, for an object with these finalizers that
// is (deleting) or is not being deleted: while it lives, adds finalizer (once) and
// returns true; once it is being deleted and still carries finalizer, runs cleanup
// and then removes finalizer (so Kubernetes can delete it) and returns false. A
// cleanup that fails keeps the finalizer, and its error is returned to be retried.
func Finalize(ref ObjectRef, finalizers []string, deleting bool, finalizer string, cleanup func() error) (bool, error) {
	carries := false
	for _, f := range finalizers {
		carries = carries || f == finalizer
	}
	if deleting {
		if !carries {
			return false, nil
		}
		if err := cleanup(); err != nil {
			return false, err
		}
		return false, PatchFinalizers(ref, nil, []string{finalizer})
	}
	if !carries {
		return true, PatchFinalizers(ref, []string{finalizer}, nil)
	}
	return true, nil
}

// Settings decodes the plugin's settings from the operator
// (`<plugin>.settings.json` or `.yaml` beside the plugin file) into out; false if
// there are none. Readable in Registration too.
func Settings(out any) (bool, error) {
	text, ok := SettingsJSON()
	if !ok {
		return false, nil
	}
	return true, decode(text, out)
}
