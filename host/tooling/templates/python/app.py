"""{{name}}: counts the keys of opted-in ConfigMaps into a label."""

from wasm_controller import (CONFIG_MAP, Controller, Done, NotFound, Registration, Verb,
                             Watch, cluster, export, log)

from logic import keys_label

ENABLED = "{{name}}.example.com/enabled"
KEYS = "{{name}}.example.com/keys"


class Plugin(Controller):
    def registration(self):
        return (Registration("{{name}}", "0.1.0")
                .watch(Watch.all(CONFIG_MAP).labels(ENABLED))
                .permit(CONFIG_MAP, Verb.PATCH))

    def reconcile(self, request):
        ref = request.object()
        try:
            config_map = cluster.get(ref)
        except NotFound:
            return Done()  # deleted meanwhile
        wanted = keys_label(config_map)
        labels = config_map["metadata"].get("labels") or {}
        if labels.get(KEYS) != wanted:
            # The Event before the label: once the label is right this branch is not
            # taken again, so an Event recorded after it would be lost to a crash in
            # between (`make test` runs `--faults all`, which finds that).
            note = f"{wanted} keys"
            cluster.record_event(ref, "KeysCounted", note)
            cluster.patch_labels(ref, {KEYS: wanted})
            log.info(f"{request.name}: {note}")
        return Done()


Reconciler = export(Plugin())
