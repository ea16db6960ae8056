package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestThePluginDoesWhatTestdataExpectsWhateverFaultStrikes runs the plugin itself with
// `wasm-controller-manager test` on the objects in testdata/: what it does must be what
// testdata/expected.yaml says, and it must end in the same state whatever fault strikes
// (a crash right after a write, a stale cache, a late watch event, an API error or
// timeout). Build {{name}}.wasm first (`make test` does); the host binary is $WCM, else
// wasm-controller-manager on PATH.
func TestThePluginDoesWhatTestdataExpectsWhateverFaultStrikes(t *testing.T) {
	wcm := os.Getenv("WCM")
	if wcm == "" {
		wcm = "wasm-controller-manager"
	}
	out, err := exec.Command(wcm, "test", "{{name}}.wasm", "testdata/cluster.yaml",
		"--expect", "testdata/expected.yaml", "--faults", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("%s test: %v\n%s", wcm, err, out)
	}
}
