"""phase-labeller: a controller written in Python.

For every Pod labelled `example.com/track-phase`, writes the Pod's phase
(`status.phase`, for example `Pending`) into the label `example.com/phase` and records
a `PhaseLabelled` Event when the label changes.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import reconciler as r
from wit_world.imports import cluster, log, types

TRACK = "example.com/track-phase"
PHASE = "example.com/phase"
POD = types.Gvk(group="", version="v1", kind="Pod")


class Reconciler(exports.Reconciler):
    def register(self) -> r.Registration:
        return r.Registration(
            name="phase-labeller",
            version="0.1.0",
            watches=[r.Watch(kind=POD, namespace=None, label_selector=TRACK, maps_to=r.KeyMapping_Object())],
            permissions=[r.Permission(kind=POD, verbs=[r.Verb.PATCH])],
            max_concurrent_reconciles=0,
            resync_period_ms=None,
        )

    def reconcile(self, req: r.Request) -> r.Action:
        pod_ref = types.ObjectRef(kind=POD, namespace=req.namespace, name=req.name)
        try:
            pod = json.loads(cluster.get(pod_ref))
        except Err as e:
            if isinstance(e.value, types.Error_NotFound):
                return r.Action_Done()  # deleted meanwhile
            raise
        phase = pod.get("status", {}).get("phase") or "Unknown"
        labels = pod.get("metadata", {}).get("labels") or {}
        if labels.get(PHASE) != phase:
            cluster.patch_labels(pod_ref, [(PHASE, phase)], [])
            cluster.record_event(pod_ref, types.EventType.NORMAL, "PhaseLabelled", f"phase {phase}")
            log.log(log.Level.INFO, f"labelled {req.namespace}/{req.name} {phase}")
        return r.Action_Done()
