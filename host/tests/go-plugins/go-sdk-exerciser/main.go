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
//   - `list` lists the ConfigMaps it watches in its namespace, counts them, and reads
//     the first one alone: `<listed>-<counted>-<first name>`;
//   - `forbidden` labels a Node, which it did not declare;
//   - `create` creates a ConfigMap by `generateName` (once: not when it has an outcome);
//   - `merge-patch` annotates itself by a merge patch guarded by the resourceVersion it
//     read, then tries one guarded by a stale one and reports the conflict's status;
//   - `json-patch` adds a data key by a JSON patch guarded by a `test` of its `op`,
//     then tries one whose `test` fails;
//   - `update` writes back what it read with a data key added (typed Update);
//   - `finalize` keeps the finalizer `wcm.test/go-sdk`; when it is being deleted, it
//     deletes the ConfigMap named by `record` in the namespace `records` (an external
//     record) and then lets it go;
//   - `delete-stale` deletes `target` only if its uid is `not-the-uid` (a conflict);
//   - `event` records an Event with an action and the Deployment `web` as related;
//   - `live-get` reads the Service named by `service`, a kind declared but not watched;
//   - `terminal` fails for good, `requeue` asks to be reconciled again.
//
// Every reconcile counts its op (a counter with a label), observes its data size (a
// histogram), logs with fields and reads its settings (the test kit gives none).
// Deployments are watched for generation changes only, so the `status` op's status
// write does not wake their key; Secrets of two namespaces are watched metadata-only
// through a field selector.
package main

import (
	"encoding/json"
	"fmt"

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
		Watch(ctl.WatchAll(ctl.Deployment).Labels(optIn).When(ctl.GenerationChanged).FixedKey("deployments")).
		Watch(ctl.WatchAll(ctl.Secret).InNamespace("go", "go-other").Fields("type=Opaque").
			Metadata().When(ctl.LabelsChanged, ctl.DeletionStarted).FixedKey("secrets")).
		Permit(ctl.ConfigMap, ctl.VerbPatch, ctl.VerbApply, ctl.VerbDelete, ctl.VerbCreate, ctl.VerbUpdate).
		Permit(ctl.Deployment, ctl.VerbPatchStatus).
		Permit(ctl.Service, ctl.VerbGet).
		Counter("ops", "Operations exercised", "op").
		Histogram("data_keys", "Data keys per ConfigMap", []float64{1, 2, 4})
}

func (exerciser) Reconcile(req ctl.Request) (ctl.Action, error) {
	if req.Kind == nil {
		return ctl.Done(), nil // a Deployment or a Secret changed: nothing to do
	}
	ref := ctl.Ref(ctl.ConfigMap, *req.Namespace, req.Name)
	cm, err := ctl.Get[corev1.ConfigMap](ref)
	if ctl.IsNotFound(err) {
		return ctl.Done(), nil
	}
	if err != nil {
		return ctl.Done(), err
	}
	op := cm.Data["op"]
	if err := observe(op, cm); err != nil {
		return ctl.Done(), err
	}
	switch op {
	case "terminal":
		return ctl.Done(), ctl.Terminal(ctl.NewError(ctl.Invalid, "asked to fail for good"))
	case "requeue":
		return ctl.Requeue(), nil
	case "finalize":
		return ctl.Done(), finalize(cm, ref)
	}
	if op == "create" && cm.Labels[outcome] != "" {
		return ctl.Done(), nil
	}
	result, err := do(cm, ref)
	if err != nil {
		return ctl.Done(), err
	}
	return ctl.Done(), ctl.PatchLabels(ref, map[string]string{outcome: result}, nil)
}

// observe counts the op, observes the data's size, logs with fields and checks there
// are no settings.
func observe(op string, cm corev1.ConfigMap) error {
	if err := ctl.Metrics.Inc("ops", op); err != nil {
		return err
	}
	if err := ctl.Metrics.Observe("data_keys", float64(len(cm.Data))); err != nil {
		return err
	}
	var settings map[string]any
	if found, err := ctl.Settings(&settings); found || err != nil {
		ctl.Warnw("settings where the test kit gives none", "error", err)
	}
	ctl.Infow("exercising", "op", op, "configmap", cm.Name)
	return nil
}

func do(cm corev1.ConfigMap, ref ctl.ObjectRef) (string, error) {
	switch cm.Data["op"] {
	case "create", "merge-patch", "json-patch", "update", "delete-stale", "event", "live-get":
		return write(cm, ref)
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
		return list(cm.Namespace)
	case "forbidden":
		node := ctl.Ref(ctl.Node, "", "any")
		err := ctl.PatchLabels(node, map[string]string{"a": "b"}, nil)
		return fmt.Sprintf("forbidden-%t", ctl.IsForbidden(err)), nil
	}
	return "unknown-op", nil
}

func list(namespace string) (string, error) {
	all, err := ctl.List[corev1.ConfigMap](ctl.ConfigMap, &namespace, nil)
	if err != nil {
		return "", err
	}
	count, err := ctl.Count(ctl.ConfigMap, &namespace, nil)
	if err != nil {
		return "", err
	}
	first, err := ctl.ListFirst[corev1.ConfigMap](ctl.ConfigMap, &namespace, nil, 1)
	if err != nil || len(first) != 1 {
		return "no-first", err
	}
	return fmt.Sprintf("%d-%d-%s", len(all), count, first[0].Name), nil
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
