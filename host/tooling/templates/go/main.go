// {{name}}: counts the keys of opted-in ConfigMaps into a label.
package main

import (
	"fmt"
	"strconv"

	ctl "wasm-controller-manager.io/sdk/controller"
)

const (
	enabled = "{{name}}.example.com/enabled"
	keys    = "{{name}}.example.com/keys"
)

// configMap holds what the plugin reads of a ConfigMap.
type configMap struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

// keysLabel is the label value for a ConfigMap: how many keys its data has.
func keysLabel(cm configMap) string { return strconv.Itoa(len(cm.Data)) }

type plugin struct{}

func (plugin) Registration() ctl.Registration {
	return ctl.NewRegistration("{{name}}", "0.1.0").
		Watch(ctl.WatchAll(ctl.ConfigMap).Labels(enabled)).
		Permit(ctl.ConfigMap, ctl.VerbPatch)
}

func (plugin) Reconcile(req ctl.Request) (ctl.Action, error) {
	ref := ctl.Ref(ctl.ConfigMap, *req.Namespace, req.Name)
	cm, err := ctl.Get[configMap](ref)
	if ctl.IsNotFound(err) {
		return ctl.Done(), nil // deleted meanwhile
	}
	if err != nil {
		return ctl.Done(), err
	}
	wanted := keysLabel(cm)
	if cm.Metadata.Labels[keys] == wanted {
		return ctl.Done(), nil
	}
	// The Event before the label: once the label is right this branch is not taken
	// again, so an Event recorded after it would be lost to a crash in between
	// (`make test` runs `--faults all`, which finds that).
	note := fmt.Sprintf("%s keys", wanted)
	if err := ctl.RecordEvent(ref, ctl.Normal, "KeysCounted", note); err != nil {
		return ctl.Done(), err
	}
	if err := ctl.PatchLabels(ref, map[string]string{keys: wanted}, nil); err != nil {
		return ctl.Done(), err
	}
	ctl.Infow("keys counted", "configmap", req.Name, "keys", wanted)
	return ctl.Done(), nil
}

func init() { ctl.Export(plugin{}) }

// main is not called: the host calls the plugin's exports.
func main() {}
