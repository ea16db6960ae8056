"""classic-bugs-py, a Python test plugin: the six bugs of the Rust `classic-bugs`
(host/tests/plugins/classic-bugs), each beside its fixed twin, for
`wasm-controller-manager test --faults`. It watches ConfigMaps labelled
`wcm.test/classic` and the children they control, and does what the parent's `bug`
key says:

- `create-from-cache`: creates a child with a generated name when the cache holds
  none, then labels the parent `wcm.test/children=1` (found by `stale`); fixed twin
  `create-by-name` (a fixed name, AlreadyExists taken as success);
- `trust-marker`: labels the parent `wcm.test/phase=started`, creates `<name>-work`,
  labels `phase=done`, and leaves alone a parent whose phase is set (found by
  `crash`); fixed twin `check-state` (done only when the phase is `done`);
- `swallow-error`: creates `<name>-made` inside a bare `except`, then labels the
  parent `wcm.test/done=true` (found by `errors`); fixed twin `return-error`;
- `generate-then-mark`: creates a child with a generated name, then labels the
  parent `wcm.test/made=true` (found by `crash`); fixed twin `name-then-mark`;
- `lost-update`: adds its name to the `members` of the ConfigMap `index` read from
  the cache, by a merge patch without a precondition (found by `stale`); fixed twin
  `update-with-version` (an update carrying the resourceVersion read);
- `edge-triggered`: labels `wcm.test/started=true` when it sees `phase` go from
  `Pending` to `Running` (found by `coalesce`); fixed twin `level-triggered`.
"""

from wasm_controller import (CONFIG_MAP, AlreadyExists, Controller, Done, NotFound,
                             ObjectRef, Registration, Verb, Watch, cluster,
                             controller_reference, export)

CHILD_OF = "wcm.test/child-of"


def create_child(parent, suffix):
    """Creates `<parent>-<suffix>` (a generated name after `<parent>-` when `suffix`
    is empty), controlled by the parent."""
    meta = parent["metadata"]
    child_meta = {"namespace": meta["namespace"], "labels": {CHILD_OF: meta["name"]},
                  "ownerReferences": [controller_reference(parent)]}
    if suffix:
        child_meta["name"] = f"{meta['name']}-{suffix}"
    else:
        child_meta["generateName"] = f"{meta['name']}-"
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": child_meta})


def create_if_absent(parent, suffix):
    try:
        create_child(parent, suffix)
    except AlreadyExists:
        pass


def join_index(namespace, name, with_version):
    """Adds `name` to the `members` of the ConfigMap `index`, as the cache has it: by
    a merge patch without a precondition, or (`with_version`) by an update carrying
    the resourceVersion read."""
    index = cluster.get(ObjectRef(kind=CONFIG_MAP, namespace=namespace, name="index"))
    data = index.setdefault("data", {})
    names = [m for m in data.get("members", "").split(",") if m]
    if name in names:
        return
    joined = ",".join(sorted(names + [name]))  # a set: the order of reconciles does not show
    if with_version:
        data["members"] = joined
        cluster.update(index)
    else:
        ref = ObjectRef(kind=CONFIG_MAP, namespace=namespace, name="index")
        cluster.patch(ref, {"data": {"members": joined}})


class ClassicBugs(Controller):
    def registration(self):
        return (Registration("classic-bugs-py", "0.1.0")
                .watch(Watch.all(CONFIG_MAP).labels("wcm.test/classic"))
                .watch(Watch.all(CONFIG_MAP).labels(CHILD_OF).owned_by(CONFIG_MAP))
                .permit(CONFIG_MAP, Verb.CREATE, Verb.PATCH, Verb.UPDATE))

    def reconcile(self, request):
        ref = request.object()
        try:
            parent = cluster.get(ref)
        except NotFound:
            return Done()
        bug = (parent.get("data") or {}).get("bug")
        labels = parent["metadata"].get("labels") or {}
        if bug in ("create-from-cache", "create-by-name"):
            selector = f"{CHILD_OF}={request.name}"
            if not cluster.list(CONFIG_MAP, request.namespace, selector):
                if bug == "create-by-name":
                    create_if_absent(parent, "one")
                else:
                    create_child(parent, "")
            cluster.patch_labels(ref, {"wcm.test/children": "1"})
        elif bug == "trust-marker" and "wcm.test/phase" in labels:
            pass
        elif bug == "check-state" and labels.get("wcm.test/phase") == "done":
            pass
        elif bug in ("trust-marker", "check-state"):
            cluster.patch_labels(ref, {"wcm.test/phase": "started"})
            create_if_absent(parent, "work")
            cluster.patch_labels(ref, {"wcm.test/phase": "done"})
        elif bug in ("swallow-error", "return-error") and "wcm.test/done" in labels:
            pass
        elif bug == "swallow-error":
            try:
                create_child(parent, "made")
            except Exception:  # noqa: BLE001 - the bug this plugin is for
                pass
            cluster.patch_labels(ref, {"wcm.test/done": "true"})
        elif bug == "return-error":
            create_if_absent(parent, "made")
            cluster.patch_labels(ref, {"wcm.test/done": "true"})
        elif bug in ("generate-then-mark", "name-then-mark") and "wcm.test/made" in labels:
            pass
        elif bug == "generate-then-mark":
            create_child(parent, "")
            cluster.patch_labels(ref, {"wcm.test/made": "true"})
        elif bug == "name-then-mark":
            create_if_absent(parent, "made")
            cluster.patch_labels(ref, {"wcm.test/made": "true"})
        elif bug in ("lost-update", "update-with-version"):
            join_index(request.namespace, request.name, bug == "update-with-version")
        elif bug in ("edge-triggered", "level-triggered"):
            phase = (parent.get("data") or {}).get("phase", "")
            last = labels.get("wcm.test/last-phase", "")
            if bug == "edge-triggered":
                started = last == "Pending" and phase == "Running"
            else:
                started = phase == "Running"
            wanted = {"wcm.test/last-phase": phase}
            if started:
                wanted["wcm.test/started"] = "true"
            cluster.patch_labels(ref, wanted)
        return Done()


Reconciler = export(ClassicBugs())
