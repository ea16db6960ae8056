"""sdk-exerciser-py, a Python test plugin: the Python SDK's calls, errors and helpers.

For each Deployment labelled `wcm.test/sdk`, it applies a ConfigMap `<name>-settings`
controlled by the Deployment (`set_controller_reference`; the ConfigMap's changes wake
the Deployment's key), sets the Deployment's `Ready` condition (`set_condition`,
`patch_status`), applies the ConfigMap `shared` that the fixtures own without force
and records the `Conflict` it gets as a Warning Event (action `Apply`, the ConfigMap
as related object, the HTTP status and the owning manager from the error's causes in
the note), and records the `NotFound` of a ConfigMap it cannot see as a Normal Event;
the ConfigMap's data also holds how many Deployments labelled `wcm.test/sdk` the
namespace has (`cluster.count`) and the first one's name (`cluster.list_first`); it logs
`exercised` with a field and keeps the finalizer `wcm.test/sdk` on the
Deployment (`finalize`), with nothing to clean up. A Deployment labelled `wcm.test/sdk=raise` makes
`reconcile` raise a ValueError, which the SDK returns to the host as `other`; one
labelled `wcm.test/sdk=terminal` fails with a terminal `invalid`. The JavaScript twin
is host/tests/javascript-plugins/.
"""

from wasm_controller import (CONFIG_MAP, DEPLOYMENT, Conflict, Controller, Done, Invalid,
                             NotFound, ObjectRef, Registration, Verb, Watch, cluster, export,
                             finalize, log, metrics, set_condition,
                             set_controller_reference, terminal)
from wasm_controller import settings as operator_settings

SDK = "wcm.test/sdk"


class Exerciser(Controller):
    def registration(self):
        return (Registration("sdk-exerciser-py", "0.1.0")
                .watch(Watch.all(DEPLOYMENT).labels(SDK))
                .watch(Watch.all(CONFIG_MAP).labels(SDK).owned_by(DEPLOYMENT))
                # Every watch option across the boundary (the host checks each at load).
                .watch(Watch.all(DEPLOYMENT).in_namespace("sdk-elsewhere", "sdk-other")
                       .labels(SDK).fields("metadata.name!=ignored").metadata_only()
                       .when("generation-changed", "labels-changed"))
                .permit(CONFIG_MAP, Verb.APPLY)
                .permit(DEPLOYMENT, Verb.PATCH_STATUS, Verb.PATCH)
                .counter("reconciled", "Deployments reconciled", "namespace")
                .gauge("replicas", "Replicas of the last Deployment")
                .histogram("label_count", "Labels per Deployment", buckets=[1, 2, 4]))

    def reconcile(self, request):
        ref = request.object()
        try:
            deployment = cluster.get(ref)
        except NotFound:
            return Done()
        meta = deployment["metadata"]
        if operator_settings() is not None:
            log.warn("settings where the test kit gives none")
        metrics.inc("reconciled", meta["namespace"])
        metrics.set("replicas", deployment["spec"].get("replicas", 1))
        metrics.observe("label_count", len(meta.get("labels", {})))
        if not finalize(ref, deployment, SDK, lambda: None):
            return Done()
        if meta["labels"].get(SDK) == "raise":
            raise ValueError("asked to fail")
        if meta["labels"].get(SDK) == "terminal":
            raise terminal(Invalid("asked to fail for good"))
        # Its Deployments here, counted by the host; the first of them alone.
        labelled = cluster.count(DEPLOYMENT, meta["namespace"], SDK)
        first = cluster.list_first(DEPLOYMENT, 1, meta["namespace"], SDK)
        settings = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"{meta['name']}-settings",
                                 "namespace": meta["namespace"], "labels": {SDK: ""}},
                    "data": {"replicas": str(deployment["spec"].get("replicas", 1)),
                             "deployments": str(labelled), "first": first[0]["metadata"]["name"]}}
        cluster.apply(set_controller_reference(settings, deployment), force=True)
        conditions = set_condition(deployment.get("status", {}).get("conditions", []),
                                   "Ready", "True", "Exercised", "settings applied",
                                   meta.get("generation"))
        cluster.patch_status(ref, {"conditions": conditions})
        # A JSON patch guarded by a test of the generation it read.
        cluster.patch(ref, [{"op": "test", "path": "/metadata/generation",
                             "value": meta.get("generation")},
                            {"op": "add", "path": "/metadata/labels/wcm.test~1exercised",
                             "value": "yes"}], type="json")
        shared = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "shared", "namespace": meta["namespace"]},
                  "data": {"owner": meta["name"]}}
        try:
            cluster.apply(shared, force=False)
        except Conflict as e:
            owners = ", ".join(f"{c['field']} by {c['manager']}" for c in e.causes)
            shared_ref = ObjectRef(kind=CONFIG_MAP, namespace=meta["namespace"], name="shared")
            cluster.record_event(ref, "Conflict", f"{e.status}: {owners}", warning=True,
                                 action="Apply", related=shared_ref)
        try:
            cluster.get(ObjectRef(kind=CONFIG_MAP, namespace=meta["namespace"], name="missing"))
        except NotFound as e:
            cluster.record_event(ref, "NotFound", e.message)
        log.info("exercised", deployment=meta["name"])
        return Done()


Reconciler = export(Exerciser())
