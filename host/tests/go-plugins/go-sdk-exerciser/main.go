// go-sdk-exerciser, a Go test plugin: every import of the contract through the Go
// SDK, with objects decoded into k8s.io/api types. For each ConfigMap labelled
// `wcm.test/go-sdk`, it does what the ConfigMap's `op` says and writes the outcome
// into the ConfigMap's label `wcm.test/outcome`:
//
//   - `label` sets `wcm.test/seen=true` and removes `wcm.test/remove-me`;
//   - `status` reads the Deployment named by `deployment` (typed) and merges a status
//     with its generation as observedGeneration and a `Ready` condition;
//   - `delete` deletes the ConfigMap named by `target` (`orphan`), or reports
//     `not-found` when it is gone;
//   - `apply` applies a copy of itself named `<name>-copy` and reads the stored copy;
//   - `list` counts the ConfigMaps it watches;
//   - `forbidden` labels a Node, which it did not declare.
package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctl "wasm-controller-manager.io/sdk/controller"
)

const (
	optIn   = "wcm.test/go-sdk"
	outcome = "wcm.test/outcome"
)

type exerciser struct{}

func (exerciser) Registration() ctl.Registration {
	return ctl.NewRegistration("go-sdk-exerciser", "0.1.0").
		Watch(ctl.WatchAll(ctl.ConfigMap).Labels(optIn)).
		Watch(ctl.WatchAll(ctl.Deployment).Labels(optIn).FixedKey("deployments")).
		Permit(ctl.ConfigMap, ctl.VerbPatch, ctl.VerbApply, ctl.VerbDelete).
		Permit(ctl.Deployment, ctl.VerbPatchStatus)
}

func (exerciser) Reconcile(req ctl.Request) (ctl.Action, error) {
	if req.Kind == nil {
		return ctl.Done(), nil // a Deployment changed: nothing to do
	}
	ref := ctl.Ref(ctl.ConfigMap, *req.Namespace, req.Name)
	cm, err := ctl.Get[corev1.ConfigMap](ref)
	if ctl.IsNotFound(err) {
		return ctl.Done(), nil
	}
	if err != nil {
		return ctl.Done(), err
	}
	result, err := do(cm, ref)
	if err != nil {
		return ctl.Done(), err
	}
	return ctl.Done(), ctl.PatchLabels(ref, map[string]string{outcome: result}, nil)
}

func do(cm corev1.ConfigMap, ref ctl.ObjectRef) (string, error) {
	switch cm.Data["op"] {
	case "label":
		set := map[string]string{"wcm.test/seen": "true"}
		return "labelled", ctl.PatchLabels(ref, set, []string{"wcm.test/remove-me"})
	case "status":
		return status(cm)
	case "delete":
		target := ctl.Ref(ctl.ConfigMap, cm.Namespace, cm.Data["target"])
		err := ctl.Delete(target, ctl.Orphan)
		if ctl.IsNotFound(err) {
			return "not-found", nil
		}
		return "deleted", err
	case "apply":
		return apply(cm)
	case "list":
		all, err := ctl.List[corev1.ConfigMap](ctl.ConfigMap, &cm.Namespace, nil)
		return strconv.Itoa(len(all)), err
	case "forbidden":
		node := ctl.Ref(ctl.Node, "", "any")
		err := ctl.PatchLabels(node, map[string]string{"a": "b"}, nil)
		return fmt.Sprintf("forbidden-%t", ctl.IsForbidden(err)), nil
	}
	return "unknown-op", nil
}

func status(cm corev1.ConfigMap) (string, error) {
	ref := ctl.Ref(ctl.Deployment, cm.Namespace, cm.Data["deployment"])
	d, err := ctl.Get[appsv1.Deployment](ref)
	if err != nil {
		return "", err
	}
	s := map[string]any{
		"observedGeneration": d.Generation,
		"conditions": []map[string]string{{
			"type": "Ready", "status": "True", "reason": "Exercised",
			"message": fmt.Sprintf("%d replicas wanted", *d.Spec.Replicas),
		}},
	}
	text, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return "status-written", ctl.PatchStatus(ref, string(text))
}

func apply(cm corev1.ConfigMap) (string, error) {
	copied := corev1.ConfigMap{Data: cm.Data}
	copied.APIVersion, copied.Kind = "v1", "ConfigMap"
	copied.Name, copied.Namespace = cm.Name+"-copy", cm.Namespace
	text, err := json.Marshal(copied)
	if err != nil {
		return "", err
	}
	stored, err := ctl.ApplyJSON(string(text), true)
	if err != nil {
		return "", err
	}
	var back corev1.ConfigMap
	if err := json.Unmarshal([]byte(stored), &back); err != nil {
		return "", err
	}
	return "applied-" + back.Name, nil
}

func init() { ctl.Export(exerciser{}) }

func main() {}
