package main

import "testing"

func TestTheLabelIsTheNumberOfDataKeys(t *testing.T) {
	if got := keysLabel(configMap{}); got != "0" {
		t.Errorf("no data: %q, want 0", got)
	}
	if got := keysLabel(configMap{Data: map[string]string{"a": "1"}}); got != "1" {
		t.Errorf("one key: %q, want 1", got)
	}
}
