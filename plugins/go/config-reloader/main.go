// config-reloader, a Go plugin: a Deployment labelled `example.com/reload-on=<name>`
// is rolled whenever the data of the ConfigMap <name> in its namespace changes. It
// keeps a hash of that data in the Pod template's annotation
// `example.com/config-hash` (server-side apply, so it owns only that field), which
// makes the Deployment controller roll the Pods, and records a `Reloaded` Event.
package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"

	ctl "wasm-controller-manager.io/sdk/controller"
)

const (
	reloadOn   = "example.com/reload-on"
	configHash = "example.com/config-hash"
	key        = "reload"
)

type metadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// deployment holds only what the plugin reads.
type deployment struct {
	Metadata metadata `json:"metadata"`
	Spec     struct {
		Template struct {
			Metadata metadata `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
}

type configMap struct {
	Metadata   metadata          `json:"metadata"`
	Data       map[string]string `json:"data"`
	BinaryData map[string]string `json:"binaryData"`
}

type reloader struct{}

func (reloader) Registration() ctl.Registration {
	return ctl.NewRegistration("config-reloader", "0.1.0").
		Watch(ctl.WatchAll(ctl.Deployment).Labels(reloadOn).FixedKey(key)).
		Watch(ctl.WatchAll(ctl.ConfigMap).FixedKey(key)).
		Permit(ctl.Deployment, ctl.VerbApply)
}

// Reconcile brings every labelled Deployment's hash up to date with its ConfigMap.
func (reloader) Reconcile(ctl.Request) (ctl.Action, error) {
	deployments, err := ctl.List[deployment](ctl.Deployment, nil, ptr(reloadOn))
	if err != nil {
		return ctl.Done(), err
	}
	for _, d := range deployments {
		if err := reload(d); err != nil {
			return ctl.Done(), err
		}
	}
	return ctl.Done(), nil
}

func reload(d deployment) error {
	meta := d.Metadata
	ref := ctl.Ref(ctl.ConfigMap, meta.Namespace, meta.Labels[reloadOn])
	cm, err := ctl.Get[configMap](ref)
	if ctl.IsNotFound(err) {
		ctl.Warnw("ConfigMap not found", "deployment", meta.Namespace+"/"+meta.Name, "configmap", ref.Name)
		return nil
	}
	if err != nil {
		return err
	}
	hash := hashOf(cm)
	if d.Spec.Template.Metadata.Annotations[configHash] == hash {
		return nil
	}
	patch := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": meta.Name, "namespace": meta.Namespace},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{configHash: hash}},
		}},
	}
	object, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	// The Event first: a host that crashed right after the apply would otherwise
	// never record it (once the hash is set, this Deployment is skipped). A failed
	// apply is retried and records it again, counted as a repeat.
	note := fmt.Sprintf("ConfigMap %s changed (hash %s): rolling the Pods", ref.Name, hash)
	target := ctl.Ref(ctl.Deployment, meta.Namespace, meta.Name)
	if err := ctl.RecordEvent(target, ctl.Normal, "Reloaded", note); err != nil {
		return err
	}
	_, err = ctl.ApplyJSON(string(object), false)
	return err
}

// hashOf is FNV-1a (64 bits, hex) of the ConfigMap's keys and values, sorted.
func hashOf(cm configMap) string {
	entries := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		entries = append(entries, k+"="+v)
	}
	for k, v := range cm.BinaryData {
		entries = append(entries, k+"=b:"+v)
	}
	sort.Strings(entries)
	h := fnv.New64a()
	for _, e := range entries {
		h.Write([]byte(e))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func ptr(s string) *string { return &s }

func init() { ctl.Export(reloader{}) }

func main() {}
