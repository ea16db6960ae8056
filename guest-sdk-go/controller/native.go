//go:build !wasip1

// Outside a plugin (a native `go test` of a plugin's own functions) the cluster is not
// there: the cluster calls fail as unavailable and say how to test the plugin whole,
// log lines go to standard error and there are no settings, so a plugin package
// builds and its pure logic can be unit-tested with the usual `go test`.

package controller

import (
	"fmt"
	"os"
	"runtime"
	"strings"
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

// ListJSON fails outside a plugin.
func ListJSON(Gvk, *string, *string) ([]string, error) { return nil, notInPlugin() }

// ListFirstJSON fails outside a plugin.
func ListFirstJSON(Gvk, *string, *string, uint32) ([]string, error) { return nil, notInPlugin() }

// Count fails outside a plugin.
func Count(Gvk, *string, *string) (uint64, error) { return 0, notInPlugin() }

// PatchLabels fails outside a plugin.
func PatchLabels(ObjectRef, map[string]string, []string) error { return notInPlugin() }

// PatchFinalizers fails outside a plugin.
func PatchFinalizers(ObjectRef, []string, []string) error { return notInPlugin() }

// Record fails outside a plugin.
func Record(Event) error { return notInPlugin() }

// ApplyJSON fails outside a plugin.
func ApplyJSON(string, bool) (string, error) { return "", notInPlugin() }

// PatchStatus fails outside a plugin.
func PatchStatus(ObjectRef, string) error { return notInPlugin() }

// CreateJSON fails outside a plugin.
func CreateJSON(string) (string, error) { return "", notInPlugin() }

// UpdateJSON fails outside a plugin.
func UpdateJSON(string) (string, error) { return "", notInPlugin() }

// PatchRaw fails outside a plugin.
func PatchRaw(ObjectRef, PatchType, string, string) (string, error) { return "", notInPlugin() }

// DeleteIf fails outside a plugin.
func DeleteIf(ObjectRef, DeleteOptions) error { return notInPlugin() }

// SettingsJSON: a plugin has no settings outside the host.
func SettingsJSON() (string, bool) { return "", false }

// updateMetric fails outside a plugin.
func updateMetric(uint8, string, []string, float64) error { return notInPlugin() }

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

// writeLog writes to standard error outside a plugin.
func writeLog(level uint32, message string, fields [][2]string) {
	var line strings.Builder
	fmt.Fprintf(&line, "%s %s", levelNames[level], message)
	for _, f := range fields {
		fmt.Fprintf(&line, " %s=%q", f[0], f[1])
	}
	fmt.Fprintln(os.Stderr, line.String())
}
