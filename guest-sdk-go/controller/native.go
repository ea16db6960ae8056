//go:build !wasip1

// Outside a plugin (a native `go test` of a plugin's own functions) the cluster is not
// there: the cluster calls fail as unavailable and say how to test the plugin whole,
// and log lines go to standard error, so a plugin package builds and its pure logic
// can be unit-tested with the usual `go test`.

package controller

import (
	"fmt"
	"os"
	"runtime"
)

var plugin Controller

// Export registers the plugin's controller; call it from an init function.
func Export(c Controller) { plugin = c }

// Collect runs Go's garbage collector (in a plugin it runs only when asked).
func Collect() { runtime.GC() }

func notInPlugin() error {
	return &Error{Case: Unavailable, Message: "the cluster is reachable only from a plugin " +
		"running in wasm-controller-manager; test the whole plugin with `wasm-controller-manager test`"}
}

// GetJSON fails outside a plugin.
func GetJSON(ObjectRef) (string, error) { return "", notInPlugin() }

// Get fails outside a plugin.
func Get[T any](ObjectRef) (T, error) {
	var zero T
	return zero, notInPlugin()
}

// ListJSON fails outside a plugin.
func ListJSON(Gvk, *string, *string) ([]string, error) { return nil, notInPlugin() }

// List fails outside a plugin.
func List[T any](Gvk, *string, *string) ([]T, error) { return nil, notInPlugin() }

// PatchLabels fails outside a plugin.
func PatchLabels(ObjectRef, map[string]string, []string) error { return notInPlugin() }

// RecordEvent fails outside a plugin.
func RecordEvent(ObjectRef, EventType, string, string) error { return notInPlugin() }

// ApplyJSON fails outside a plugin.
func ApplyJSON(string, bool) (string, error) { return "", notInPlugin() }

// PatchStatus fails outside a plugin.
func PatchStatus(ObjectRef, string) error { return notInPlugin() }

// Delete fails outside a plugin.
func Delete(ObjectRef, Propagation) error { return notInPlugin() }

func logAt(level string, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", level, fmt.Sprintf(format, args...))
}

// Debugf logs at debug level (to standard error outside a plugin).
func Debugf(format string, args ...any) { logAt("DEBUG", format, args...) }

// Infof logs at info level (to standard error outside a plugin).
func Infof(format string, args ...any) { logAt("INFO", format, args...) }

// Warnf logs at warn level (to standard error outside a plugin).
func Warnf(format string, args ...any) { logAt("WARN", format, args...) }

// Errorf logs at error level (to standard error outside a plugin).
func Errorf(format string, args ...any) { logAt("ERROR", format, args...) }
