// The operations of contract 0.3: create, patches, update, finalizers, conditional
// deletes, Events with an action and a related object, live reads.
package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctl "wasm-controller-manager.io/sdk/controller"
)

const finalizer = "wcm.test/go-sdk"

// write does one of the 0.3 write operations and says its outcome.
func write(cm corev1.ConfigMap, ref ctl.ObjectRef) (string, error) {
	switch cm.Data["op"] {
	case "create":
		made := corev1.ConfigMap{Data: map[string]string{"from": cm.Name}}
		made.APIVersion, made.Kind = "v1", "ConfigMap"
		made.GenerateName, made.Namespace = cm.Name+"-", cm.Namespace
		stored, err := ctl.Create(made)
		return "created-" + stored.Name, err
	case "merge-patch":
		return mergePatch(cm, ref)
	case "json-patch":
		return jsonPatch(ref)
	case "update":
		cm.Data["updated"] = "yes"
		stored, err := ctl.Update(cm)
		return "updated-" + stored.Data["updated"], err
	case "delete-stale":
		uid := "not-the-uid"
		target := ctl.Ref(ctl.ConfigMap, cm.Namespace, cm.Data["target"])
		err := ctl.DeleteIf(target, ctl.DeleteOptions{UID: &uid})
		return fmt.Sprintf("conflict-%t", ctl.IsConflict(err)), nil
	case "event":
		web := ctl.Ref(ctl.Deployment, cm.Namespace, "web")
		event := ctl.Event{Regarding: ref, Related: &web, Type: ctl.Warning,
			Reason: "Exercised", Action: "Exercise", Note: "an Event with a related object"}
		return "recorded", ctl.Record(event)
	case "live-get":
		svc, err := ctl.Get[corev1.Service](ctl.Ref(ctl.Service, cm.Namespace, cm.Data["service"]))
		return "live-" + svc.Spec.ClusterIP, err
	}
	return "unknown-op", nil
}

// mergePatch annotates the ConfigMap guarded by its resourceVersion, then with a
// stale one, and reports the conflict's HTTP status.
func mergePatch(cm corev1.ConfigMap, ref ctl.ObjectRef) (string, error) {
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": cm.ResourceVersion,
		"annotations":     map[string]string{"wcm.test/patched": "yes"},
	}}
	if _, err := ctl.MergePatch(ref, patch); err != nil {
		return "", err
	}
	stale := map[string]any{"metadata": map[string]any{"resourceVersion": "1"}}
	_, err := ctl.MergePatch(ref, stale)
	var status uint16
	if e, ok := err.(*ctl.Error); ok && e.Status != nil {
		status = *e.Status
	}
	return fmt.Sprintf("merged-stale-%t-%d", ctl.IsConflict(err), status), nil
}

// jsonPatch adds a data key guarded by a test of the op, then tries a patch whose
// test fails (invalid, nothing changed).
func jsonPatch(ref ctl.ObjectRef) (string, error) {
	_, err := ctl.JSONPatch(ref,
		ctl.PatchOp{Op: "test", Path: "/data/op", Value: "json-patch"},
		ctl.PatchOp{Op: "add", Path: "/data/patched", Value: "yes"})
	if err != nil {
		return "", err
	}
	_, err = ctl.JSONPatch(ref,
		ctl.PatchOp{Op: "test", Path: "/data/op", Value: "something-else"},
		ctl.PatchOp{Op: "remove", Path: "/data/patched"})
	return fmt.Sprintf("json-patched-refused-%t", ctl.IsInvalid(err)), nil
}

// finalize keeps the finalizer; when the ConfigMap is being deleted, it deletes its
// external record (a ConfigMap in `records`) first. An outcome label is written
// only while it lives.
func finalize(cm corev1.ConfigMap, ref ctl.ObjectRef) error {
	cleanup := func() error {
		record := ctl.Ref(ctl.ConfigMap, "records", cm.Data["record"])
		if err := ctl.Delete(record, ctl.Background); err != nil && !ctl.IsNotFound(err) {
			return err
		}
		ctl.Infow("external record deleted", "record", record.Name)
		return nil
	}
	deleting := cm.DeletionTimestamp != nil
	alive, err := ctl.Finalize(ref, cm.Finalizers, deleting, finalizer, cleanup)
	if err != nil || !alive || cm.Labels[outcome] != "" {
		return err
	}
	return ctl.PatchLabels(ref, map[string]string{outcome: "finalizer-kept"}, nil)
}
