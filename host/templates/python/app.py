"""{{name}}: counts the keys of opted-in ConfigMaps into a label."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import reconciler as r
from wit_world.imports import cluster, log, types

from logic import keys_label

ENABLED = "{{name}}.example.com/enabled"
KEYS = "{{name}}.example.com/keys"
CONFIG_MAP = types.Gvk(group="", version="v1", kind="ConfigMap")


class Reconciler(exports.Reconciler):
    def register(self) -> r.Registration:
        return r.Registration(
            name="{{name}}",
            version="0.1.0",
            watches=[r.Watch(kind=CONFIG_MAP, namespace=None, label_selector=ENABLED,
                             maps_to=r.KeyMapping_Object())],
            permissions=[r.Permission(kind=CONFIG_MAP, verbs=[r.Verb.PATCH])],
            max_concurrent_reconciles=0,
            resync_period_ms=None,
        )

    def reconcile(self, req: r.Request) -> r.Action:
        ref = types.ObjectRef(kind=CONFIG_MAP, namespace=req.namespace, name=req.name)
        try:
            config_map = json.loads(cluster.get(ref))
        except Err as e:
            if isinstance(e.value, types.Error_NotFound):
                return r.Action_Done()  # deleted meanwhile
            raise
        wanted = keys_label(config_map)
        labels = config_map.get("metadata", {}).get("labels") or {}
        if labels.get(KEYS) != wanted:
            cluster.patch_labels(ref, [(KEYS, wanted)], [])
            note = f"{wanted} keys"
            cluster.record_event(ref, types.EventType.NORMAL, "KeysCounted", note)
            log.log(log.Level.INFO, f"{req.name}: {note}")
        return r.Action_Done()
