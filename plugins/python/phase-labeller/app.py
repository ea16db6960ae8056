"""phase-labeller: a controller written in Python.

For every Pod labelled `example.com/track-phase`, writes the Pod's phase
(`status.phase`, for example `Pending`) into the label `example.com/phase` and records
a `PhaseLabelled` Event when the label changes.
"""

from wasm_controller import (POD, Controller, Done, NotFound, Registration, Verb, Watch,
                             cluster, export, log)

TRACK = "example.com/track-phase"
PHASE = "example.com/phase"


class PhaseLabeller(Controller):
    def registration(self):
        return (Registration("phase-labeller", "0.1.0")
                .watch(Watch.all(POD).labels(TRACK))
                .permit(POD, Verb.PATCH))

    def reconcile(self, request):
        pod_ref = request.object()
        try:
            pod = cluster.get(pod_ref)
        except NotFound:
            return Done()  # deleted meanwhile
        phase = pod.get("status", {}).get("phase") or "Unknown"
        labels = pod["metadata"].get("labels") or {}
        if labels.get(PHASE) != phase:
            # The Event first: a host that crashes right after the label would
            # otherwise never record it (the label, once set, stops this branch).
            cluster.record_event(pod_ref, "PhaseLabelled", f"phase {phase}")
            cluster.patch_labels(pod_ref, {PHASE: phase})
            log.info(f"labelled {request.namespace}/{request.name} {phase}")
        return Done()


Reconciler = export(PhaseLabeller())
