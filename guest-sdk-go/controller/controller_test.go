package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRegistrationBuildersKeepEveryWatchAndPermission(t *testing.T) {
	reg := NewRegistration("config-reloader", "0.1.0").
		Watch(WatchAll(Deployment).Labels("example.com/reload-on").FixedKey("reload")).
		Watch(WatchAll(Pod).InNamespace("shop", "shop-2").OwnedBy(Deployment).Metadata().
			Fields("spec.nodeName=n1").When(LabelsChanged, GenerationChanged)).
		Permit(Deployment, VerbApply, VerbPatch).
		Counter("reloads", "Deployments rolled", "namespace").
		Histogram("hash_seconds", "Time to hash", []float64{0.01, 0.1})
	if len(reg.Watches) != 2 || len(reg.Permissions) != 1 || len(reg.Metrics) != 2 {
		t.Fatalf("registration %+v", reg)
	}
	first, second := reg.Watches[0], reg.Watches[1]
	if *first.LabelSelector != "example.com/reload-on" || first.mapsTo.tag != 2 || first.mapsTo.fixed != "reload" {
		t.Errorf("first watch %+v", first)
	}
	if len(second.Namespaces) != 2 || second.Namespaces[1] != "shop-2" || second.mapsTo.tag != 1 ||
		second.mapsTo.owner != Deployment || !second.MetadataOnly || *second.FieldSelector != "spec.nodeName=n1" ||
		len(second.Predicates) != 2 || second.Predicates[0] != "labels-changed" {
		t.Errorf("second watch %+v", second)
	}
	if m := reg.Metrics[1]; m.Kind != Histogram || len(m.Buckets) != 2 || reg.Metrics[0].Labels[0] != "namespace" {
		t.Errorf("metrics %+v", reg.Metrics)
	}
	if got := reg.Permissions[0].Verbs; len(got) != 2 || got[0] != "apply" {
		t.Errorf("verbs %v", got)
	}
}

func TestErrorsReadWellAndAreTellApartByCase(t *testing.T) {
	err := error(&Error{Case: NotFound, Message: "get v1/Pod shop/web: not in the cache"})
	if err.Error() != "not-found: get v1/Pod shop/web: not in the cache" {
		t.Errorf("%q", err.Error())
	}
	if !IsNotFound(err) || IsForbidden(err) || IsConflict(err) {
		t.Errorf("cases of %v", err)
	}
	if (&Error{Case: 42, Message: "x"}).Error() != "unknown: x" {
		t.Error("an unknown case")
	}
	wrapped := fmt.Errorf("reading the source: %w", &Error{Case: AlreadyExists, Message: "taken"})
	if !IsAlreadyExists(wrapped) || IsConflict(wrapped) {
		t.Errorf("a wrapped error's case: %v", wrapped)
	}
}

func TestTerminalMarksACopyAndMakesAnyErrorTheContractsOther(t *testing.T) {
	original := &Error{Case: Invalid, Message: "spec.size is negative"}
	marked := Terminal(original)
	if e := asError(marked); !e.Terminal || e.Case != Invalid || original.Terminal {
		t.Errorf("marked %+v, original %+v", e, original)
	}
	if e := asError(Terminal(errors.New("bad spec"))); !e.Terminal || e.Case != Other || e.Message != "bad spec" {
		t.Errorf("%+v", e)
	}
}

func TestRequeueActionsSayWhatTheHostDoes(t *testing.T) {
	if a := RequeueAfter(1500); a.tag != 1 || a.requeueAfterMs != 1500 {
		t.Errorf("%+v", a)
	}
	if Requeue().tag != 2 || Done().tag != 0 {
		t.Error("requeue and done")
	}
}

func TestLogFieldsArePairsAndAMissingValueIsSaid(t *testing.T) {
	got := pairs([]any{"pods", 3, "node"})
	if len(got) != 2 || got[0] != [2]string{"pods", "3"} || got[1] != [2]string{"node", "(missing)"} {
		t.Errorf("%v", got)
	}
}

func TestFinalizeCallsNothingWhenThereIsNothingToDo(t *testing.T) {
	ref := Ref(ConfigMap, "demo", "db")
	cleaned := false
	cleanup := func() error { cleaned = true; return nil }
	if alive, err := Finalize(ref, []string{"x/y", "demo/cleanup"}, false, "demo/cleanup", cleanup); !alive || err != nil {
		t.Errorf("carried while alive: %v %v", alive, err)
	}
	if alive, err := Finalize(ref, nil, true, "demo/cleanup", cleanup); alive || err != nil || cleaned {
		t.Errorf("deleting without it: %v %v cleaned=%v", alive, err, cleaned)
	}
	failed := errors.New("the record's store is down")
	_, err := Finalize(ref, []string{"demo/cleanup"}, true, "demo/cleanup", func() error { return failed })
	if err != failed {
		t.Errorf("a failed cleanup returns its error before any write: %v", err)
	}
	// Outside a plugin the writes fail: the finalizer is added or removed by a call.
	if _, err := Finalize(ref, nil, false, "demo/cleanup", cleanup); !hasCase(err, Unavailable) {
		t.Errorf("adding: %v", err)
	}
	if _, err := Finalize(ref, []string{"demo/cleanup"}, true, "demo/cleanup", cleanup); !cleaned || !hasCase(err, Unavailable) {
		t.Errorf("removing after the cleanup: %v cleaned=%v", err, cleaned)
	}
}

func TestRefAndRequestNameObjects(t *testing.T) {
	if ref := Ref(Node, "", "n1"); ref.Namespace != nil || ref.Name != "n1" {
		t.Errorf("%+v", ref)
	}
	ns := "shop"
	req := Request{Kind: &Pod, Namespace: &ns, Name: "web"}
	if ref, ok := req.Object(); !ok || *ref.Namespace != "shop" || ref.Kind != Pod {
		t.Errorf("%+v", ref)
	}
	if _, ok := (Request{Name: "count"}).Object(); ok {
		t.Error("a fixed key names no object")
	}
}

func TestClusterCallsOutsideAPluginFailAsUnavailableSayingHowToTest(t *testing.T) {
	_, err := GetJSON(Ref(ConfigMap, "demo", "settings"))
	if !hasCase(err, Unavailable) {
		t.Fatalf("got %v, want unavailable", err)
	}
	if want := "wasm-controller-manager test"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not mention %q", err, want)
	}
}
