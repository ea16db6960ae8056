package controller

import (
	"strings"
	"testing"
)

func TestRegistrationBuildersKeepEveryWatchAndPermission(t *testing.T) {
	reg := NewRegistration("config-reloader", "0.1.0").
		Watch(WatchAll(Deployment).Labels("example.com/reload-on").FixedKey("reload")).
		Watch(WatchAll(Pod).InNamespace("shop").OwnedBy(Deployment)).
		Permit(Deployment, VerbApply, VerbPatch)
	if len(reg.Watches) != 2 || len(reg.Permissions) != 1 {
		t.Fatalf("registration %+v", reg)
	}
	first, second := reg.Watches[0], reg.Watches[1]
	if *first.LabelSelector != "example.com/reload-on" || first.mapsTo.tag != 2 || first.mapsTo.fixed != "reload" {
		t.Errorf("first watch %+v", first)
	}
	if *second.Namespace != "shop" || second.mapsTo.tag != 1 || second.mapsTo.owner != Deployment {
		t.Errorf("second watch %+v", second)
	}
	if got := reg.Permissions[0].Verbs; len(got) != 2 || got[0] != VerbApply {
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
