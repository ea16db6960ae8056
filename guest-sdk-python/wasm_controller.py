"""The Python SDK of wasm-controller-manager: write a controller like the Rust SDK's.

A thin layer over the bindings componentize-py generates from the contract
(`wit/controller.wit`, wcm:controller@0.3): registration builders, objects as dicts,
one exception class per error code (with the API server's status, retry-after and
causes), terminal errors, Events with an action and a related object, structured log
fields, helpers for conditions and owner references. Build a plugin with
`componentize-py -d wit -w controller componentize app -p . -o plugin.wasm`, where
`app.py` ends with `Reconciler = export(MyController())`.

    class Keys(Controller):
        def registration(self):
            return Registration("keys", "0.1.0").watch(Watch.all(CONFIG_MAP)).permit(
                CONFIG_MAP, Verb.PATCH)

        def reconcile(self, request):
            try:
                config_map = cluster.get(request.object())
            except NotFound:
                return Done()  # deleted meanwhile
            ...
            return Done()

    Reconciler = export(Keys())
"""

import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import reconciler as r
from wit_world.imports import cluster as _cluster
from wit_world.imports import config as _config
from wit_world.imports import log as _log
from wit_world.imports import metrics as _metrics
from wit_world.imports import types

Gvk = types.Gvk
ObjectRef = types.ObjectRef
Propagation = _cluster.Propagation


class Verb:
    """The verbs a plugin may declare on a kind, as the contract spells them."""
    GET = "get"
    LIST = "list"
    PATCH = "patch"
    APPLY = "apply"
    PATCH_STATUS = "patch/status"
    PATCH_SCALE = "patch/scale"
    DELETE = "delete"
    CREATE = "create"
    UPDATE = "update"

POD = Gvk(group="", version="v1", kind="Pod")
NODE = Gvk(group="", version="v1", kind="Node")
CONFIG_MAP = Gvk(group="", version="v1", kind="ConfigMap")
SECRET = Gvk(group="", version="v1", kind="Secret")
SERVICE = Gvk(group="", version="v1", kind="Service")
NAMESPACE = Gvk(group="", version="v1", kind="Namespace")
DEPLOYMENT = Gvk(group="apps", version="v1", kind="Deployment")
STATEFUL_SET = Gvk(group="apps", version="v1", kind="StatefulSet")
DAEMON_SET = Gvk(group="apps", version="v1", kind="DaemonSet")
REPLICA_SET = Gvk(group="apps", version="v1", kind="ReplicaSet")
JOB = Gvk(group="batch", version="v1", kind="Job")


# --- errors --------------------------------------------------------------------------

class ClusterError(Exception):
    """A failed host call, or a reconcile's own failure: `case` is the contract's code.

    `status` is the API server's HTTP status (None when the host refused before any
    call), `retry_after_ms` how long it asked to wait, `causes` its field-level
    reasons as dicts (`field`, `reason`, `message`, `manager` for apply conflicts).
    Raised from `reconcile`, it is retried with backoff unless `terminal` is set
    (see `terminal()`).
    """

    case = "other"
    code = types.ErrorCode.OTHER

    def __init__(self, message: str, status: Optional[int] = None,
                 retry_after_ms: Optional[int] = None, causes: Optional[List[dict]] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.causes = list(causes or [])
        self.terminal = False

    def __str__(self) -> str:
        return f"{self.case}: {self.message}"


class NotFound(ClusterError):
    """The object does not exist (or is not in the cache yet)."""
    case, code = "not-found", types.ErrorCode.NOT_FOUND


class AlreadyExists(ClusterError):
    """A create found the name taken."""
    case, code = "already-exists", types.ErrorCode.ALREADY_EXISTS


class Forbidden(ClusterError):
    """Not declared by the plugin, or denied by the cluster's RBAC."""
    case, code = "forbidden", types.ErrorCode.FORBIDDEN


class Conflict(ClusterError):
    """Someone else changed or owns what the plugin tried to write."""
    case, code = "conflict", types.ErrorCode.CONFLICT


class Invalid(ClusterError):
    """Malformed input: a bad name, label, selector or JSON."""
    case, code = "invalid", types.ErrorCode.INVALID


class Unavailable(ClusterError):
    """The API server or the cache is not reachable or ready; retry later."""
    case, code = "unavailable", types.ErrorCode.UNAVAILABLE


class Other(ClusterError):
    """Anything else."""


_BY_CODE = {cls.code: cls for cls in
            (NotFound, AlreadyExists, Forbidden, Conflict, Invalid, Unavailable, Other)}


def terminal(error: ClusterError) -> ClusterError:
    """`error`, marked terminal: raised from `reconcile`, the host records it and does
    not retry the key until something queues it again (`raise terminal(Invalid(...))`)."""
    error.terminal = True
    return error


def _raised(e: Err) -> ClusterError:
    wit = e.value
    causes = [{"field": c.field, "reason": c.reason, "message": c.message,
               "manager": c.manager} for c in wit.causes]
    cls = _BY_CODE.get(wit.code, Other)
    return cls(wit.message, wit.status, wit.retry_after_ms, causes)


def _to_wit(e: ClusterError) -> types.Error:
    causes = [types.Cause(field=c.get("field", ""), reason=c.get("reason", ""),
                          message=c.get("message", ""), manager=c.get("manager"))
              for c in e.causes]
    return types.Error(code=e.code, message=e.message, status=e.status,
                       retry_after_ms=e.retry_after_ms, causes=causes)


def _call(function, *args):
    try:
        return function(*args)
    except Err as e:
        raise _raised(e) from None


# --- registration ----------------------------------------------------------------------

@dataclass
class Watch:
    """One kind the plugin watches, and how a change becomes a key."""

    kind: Gvk
    namespaces: List[str] = field(default_factory=list)
    label_selector: Optional[str] = None
    field_selector: Optional[str] = None
    only_metadata: bool = False
    predicates: List[str] = field(default_factory=list)
    maps_to: object = field(default_factory=r.KeyMapping_Object)

    @staticmethod
    def all(kind: Gvk) -> "Watch":
        """Every object of `kind`, each waking its own key."""
        return Watch(kind)

    def in_namespace(self, *namespaces: str) -> "Watch":
        """Only objects in these namespaces (each is an informer of its own)."""
        self.namespaces.extend(namespaces)
        return self

    def labels(self, selector: str) -> "Watch":
        """Only objects matching a label selector (`app=web`, `example.com/opt-in`)."""
        self.label_selector = selector
        return self

    def fields(self, selector: str) -> "Watch":
        """Only objects matching a field selector (`spec.nodeName=node-1`), evaluated
        by the API server."""
        self.field_selector = selector
        return self

    def metadata_only(self) -> "Watch":
        """Hold only apiVersion, kind and metadata of the objects (no spec, no status)."""
        self.only_metadata = True
        return self

    def when(self, *predicates: str) -> "Watch":
        """Queue an update only when one of these holds: `generation-changed`,
        `labels-changed`, `annotations-changed`, `finalizers-changed`,
        `deletion-started`. Creates, deletes and resyncs always queue."""
        self.predicates.extend(predicates)
        return self

    def fixed_key(self, key: str) -> "Watch":
        """Every change wakes the one key `key` (for aggregates such as counts)."""
        self.maps_to = r.KeyMapping_Fixed(key)
        return self

    def owned_by(self, owner: Gvk) -> "Watch":
        """A change wakes the object's controller owner of kind `owner`."""
        self.maps_to = r.KeyMapping_ControllerOwner(owner)
        return self


class Registration:
    """Who the plugin is and what it needs; built with chained calls."""

    def __init__(self, name: str, version: str):
        self.name, self.version = name, version
        self.watches: List[Watch] = []
        self.permissions: Dict[tuple, set] = {}
        self.max_concurrent_reconciles = 0
        self.resync_period_ms: Optional[int] = None
        self.metrics: List[r.Metric] = []

    def watch(self, watch: Watch) -> "Registration":
        self.watches.append(watch)
        return self

    def permit(self, kind: Gvk, *verbs: str) -> "Registration":
        key = (kind.group, kind.version, kind.kind)
        self.permissions.setdefault(key, set()).update(verbs)
        return self

    def concurrency(self, n: int) -> "Registration":
        self.max_concurrent_reconciles = n
        return self

    def resync_every(self, seconds: float) -> "Registration":
        self.resync_period_ms = int(seconds * 1000)
        return self

    def counter(self, name: str, help: str, *labels: str) -> "Registration":
        """Declares a counter, exported as `wcm_plugin_<plugin>_<name>_total`."""
        return self._metric(name, help, r.MetricKind.COUNTER, labels, [])

    def gauge(self, name: str, help: str, *labels: str) -> "Registration":
        """Declares a gauge."""
        return self._metric(name, help, r.MetricKind.GAUGE, labels, [])

    def histogram(self, name: str, help: str, *labels: str,
                  buckets: Optional[List[float]] = None) -> "Registration":
        """Declares a histogram (default buckets: 5 ms to 10 s)."""
        return self._metric(name, help, r.MetricKind.HISTOGRAM, labels, buckets or [])

    def _metric(self, name, help, kind, labels, buckets) -> "Registration":
        self.metrics.append(r.Metric(name=name, help=help, kind=kind, labels=list(labels),
                                     buckets=[float(b) for b in buckets]))
        return self

    def _to_wit(self) -> r.Registration:
        watches = [r.Watch(kind=w.kind, namespaces=list(w.namespaces),
                           label_selector=w.label_selector,
                           field_selector=w.field_selector,
                           metadata_only=w.only_metadata,
                           predicates=list(w.predicates), maps_to=w.maps_to)
                   for w in self.watches]
        permissions = [r.Permission(kind=Gvk(group=g, version=v, kind=k),
                                    verbs=sorted(verbs))
                       for (g, v, k), verbs in self.permissions.items()]
        return r.Registration(name=self.name, version=self.version, watches=watches,
                              permissions=permissions,
                              max_concurrent_reconciles=self.max_concurrent_reconciles,
                              resync_period_ms=self.resync_period_ms,
                              metrics=self.metrics)


# --- reconcile -------------------------------------------------------------------------

@dataclass
class Request:
    """The key to reconcile: an object (kind set) or a fixed key (kind None)."""

    kind: Optional[Gvk]
    namespace: Optional[str]
    name: str

    def object(self) -> Optional[ObjectRef]:
        """The object the key names; None for a fixed key."""
        if self.kind is None:
            return None
        return ObjectRef(kind=self.kind, namespace=self.namespace, name=self.name)


def Done():
    """Nothing to do until something changes."""
    return r.Action_Done()


def RequeueAfter(seconds: float):
    """Reconcile this key again after `seconds` (an earlier change still wakes it)."""
    return r.Action_RequeueAfter(int(seconds * 1000))


def Requeue():
    """Reconcile this key again after its backoff, without an error ("not ready yet")."""
    return r.Action_Requeue()


class Controller:
    """Implement `registration` and `reconcile`, then `Reconciler = export(...)`."""

    def registration(self) -> Registration:
        raise NotImplementedError

    def reconcile(self, request: Request):
        raise NotImplementedError


def export(controller: Controller):
    """The class componentize-py calls: assign it to `Reconciler` in the app module.

    A `ClusterError` raised by `reconcile` is returned as that code (the host logs it
    and retries the key with backoff, or records it and stops if it is `terminal`);
    any other exception is logged with its traceback and returned as `other`, so the
    instance does not trap.
    """

    class Reconciler(exports.Reconciler):
        def register(self) -> r.Registration:
            return controller.registration()._to_wit()

        def reconcile(self, req: r.Request):
            request = Request(kind=req.kind, namespace=req.namespace, name=req.name)
            try:
                return controller.reconcile(request)
            except ClusterError as e:
                failure = r.Failure_Terminal if e.terminal else r.Failure_Retry
                raise Err(failure(_to_wit(e))) from None
            except Exception as e:  # noqa: BLE001 - the host gets every failure
                log.error(traceback.format_exc())
                error = Other(f"{type(e).__name__}: {e}")
                raise Err(r.Failure_Retry(_to_wit(error))) from None

    return Reconciler


# --- the cluster -----------------------------------------------------------------------

class cluster:
    """Reads from the host's caches and writes as the plugin (objects are dicts)."""

    @staticmethod
    def get(ref: ObjectRef) -> dict:
        """One object: of a watched kind from the cache, of a kind declared with
        `Verb.GET` but not watched live from the API server; raises NotFound if it is
        not there."""
        return json.loads(_call(_cluster.get, ref))

    @staticmethod
    def list(kind: Gvk, namespace: Optional[str] = None,
             label_selector: Optional[str] = None) -> List[dict]:
        """Objects of a watched kind, sorted by namespace and name."""
        return [json.loads(o) for o in
                _call(_cluster.list, kind, namespace, label_selector)]

    @staticmethod
    def list_first(kind: Gvk, limit: int, namespace: Optional[str] = None,
                   label_selector: Optional[str] = None) -> List[dict]:
        """The first `limit` objects `list` would return: a batch out of thousands, the
        rest never copied into the plugin. Ask for one more than the batch to learn
        whether more remain."""
        return [json.loads(o) for o in
                _call(_cluster.list_first, kind, namespace, label_selector, limit)]

    @staticmethod
    def count(kind: Gvk, namespace: Optional[str] = None,
              label_selector: Optional[str] = None) -> int:
        """How many objects `list` would return, counted by the host: nothing is copied
        into the plugin or decoded."""
        return _call(_cluster.count, kind, namespace, label_selector)

    @staticmethod
    def patch_labels(ref: ObjectRef, set: Dict[str, str],  # noqa: A002 - the contract's word
                     remove: Optional[List[str]] = None) -> None:
        """Sets labels and removes keys, as the plugin's field manager."""
        _call(_cluster.patch_labels, ref, sorted(set.items()), list(remove or []))

    @staticmethod
    def patch_finalizers(ref: ObjectRef, add: Optional[List[str]] = None,
                         remove: Optional[List[str]] = None) -> None:
        """Adds and removes finalizers, leaving other controllers' alone (guarded by the
        object's resourceVersion, tried again on a conflict)."""
        _call(_cluster.patch_finalizers, ref, list(add or []), list(remove or []))

    @staticmethod
    def record_event(ref: ObjectRef, reason: str, note: str, warning: bool = False,
                     action: str = "", related: Optional[ObjectRef] = None) -> None:
        """Records an Event about `ref` (Normal, or Warning with `warning=True`);
        `action` (PascalCase, default `Reconcile`) says what the plugin did, `related`
        names a second object it involved."""
        kind = types.EventType.WARNING if warning else types.EventType.NORMAL
        event = _cluster.Event(regarding=ref, related=related, type=kind, reason=reason,
                               action=action, note=note)
        _call(_cluster.record_event, event)

    @staticmethod
    def apply(obj: dict, force: bool) -> dict:
        """Server-side applies a whole object; returns it as stored."""
        return json.loads(_call(_cluster.apply, json.dumps(obj), force))

    @staticmethod
    def create(obj: dict) -> dict:
        """Creates the object (named, or with metadata.generateName); returns it as
        stored; raises AlreadyExists if the name is taken."""
        return json.loads(_call(_cluster.create, json.dumps(obj)))

    @staticmethod
    def patch(ref: ObjectRef, patch, type: str = "merge",
              subresource: Optional[str] = None) -> dict:
        """Patches the object (or its `status` or `scale`): a merge patch (a dict) or,
        with type="json", a JSON patch (a list of operations); returns what is stored.
        A `metadata.resourceVersion` in a merge patch makes it conditional (Conflict)."""
        kind = _cluster.PatchType.JSON if type == "json" else _cluster.PatchType.MERGE
        return json.loads(_call(_cluster.patch, ref, kind, json.dumps(patch), subresource))

    @staticmethod
    def update(obj: dict) -> dict:
        """Replaces an object read earlier (it carries its metadata.resourceVersion);
        raises Conflict if it changed since."""
        return json.loads(_call(_cluster.update, json.dumps(obj)))

    @staticmethod
    def patch_status(ref: ObjectRef, status: dict) -> None:
        """Merges `status` into the object's status subresource."""
        _call(_cluster.patch_status, ref, json.dumps(status))

    @staticmethod
    def delete(ref: ObjectRef, propagation: Propagation = Propagation.BACKGROUND,
               uid: Optional[str] = None, resource_version: Optional[str] = None) -> None:
        """Deletes the object; raises NotFound if it is gone already, Conflict if it
        is no longer the object with `uid` or at `resource_version`."""
        options = _cluster.DeleteOptions(propagation=propagation, uid=uid,
                                         resource_version=resource_version)
        _call(_cluster.delete, ref, options)


class log:
    """Log lines into the host's log, tagged with the plugin and key; keyword
    arguments become the line's fields (`log.info("counted", pods=3)`)."""

    @staticmethod
    def _write(level, message: str, fields: dict) -> None:
        _log.log(level, message, [(k, str(v)) for k, v in fields.items()])

    @staticmethod
    def debug(message: str, **fields) -> None:
        log._write(_log.Level.DEBUG, message, fields)

    @staticmethod
    def info(message: str, **fields) -> None:
        log._write(_log.Level.INFO, message, fields)

    @staticmethod
    def warn(message: str, **fields) -> None:
        log._write(_log.Level.WARN, message, fields)

    @staticmethod
    def error(message: str, **fields) -> None:
        log._write(_log.Level.ERROR, message, fields)


def settings() -> Optional[dict]:
    """The plugin's settings from the operator (`<plugin>.settings.json` or `.yaml`
    beside the plugin file) as a dict, or None; readable in `registration` too."""
    text = _config.settings()
    return None if text is None else json.loads(text)


class metrics:
    """Updates of the metrics declared with `Registration.counter`, `.gauge` and
    `.histogram`: one label value per declared label, in order."""

    @staticmethod
    def add(name: str, value: float, *labels: str) -> None:
        """Adds `value` to a counter (at least 0) or a gauge."""
        _call(_metrics.add, name, list(labels), float(value))

    @staticmethod
    def inc(name: str, *labels: str) -> None:
        """Adds 1 to a counter."""
        metrics.add(name, 1.0, *labels)

    @staticmethod
    def set(name: str, value: float, *labels: str) -> None:
        """Sets a gauge."""
        _call(_metrics.set, name, list(labels), float(value))

    @staticmethod
    def observe(name: str, value: float, *labels: str) -> None:
        """Observes one value of a histogram."""
        _call(_metrics.observe, name, list(labels), float(value))


# --- helpers ---------------------------------------------------------------------------

def finalize(ref: ObjectRef, obj: dict, finalizer: str, cleanup) -> bool:
    """The usual finalizer pattern: while `obj` lives, adds `finalizer` (once) and
    returns True; once it is being deleted and still carries `finalizer`, calls
    `cleanup()` and then removes `finalizer` (so Kubernetes can delete it) and returns
    False. A `cleanup` that raises keeps the finalizer, and the key is retried."""
    meta = obj.get("metadata", {})
    carries = finalizer in meta.get("finalizers", [])
    if meta.get("deletionTimestamp"):
        if carries:
            cleanup()
            cluster.patch_finalizers(ref, remove=[finalizer])
        return False
    if not carries:
        cluster.patch_finalizers(ref, add=[finalizer])
    return True


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def set_condition(conditions: List[dict], type_: str, status: str, reason: str,
                  message: str, observed_generation: Optional[int] = None) -> List[dict]:
    """Conditions with `type_` set; `lastTransitionTime` moves only when the status
    changes (as meta.SetStatusCondition does)."""
    previous = next((c for c in conditions if c.get("type") == type_), None)
    changed = previous is None or previous.get("status") != status
    condition = {"type": type_, "status": status, "reason": reason, "message": message,
                 "lastTransitionTime": now() if changed else previous["lastTransitionTime"]}
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    return [c for c in conditions if c.get("type") != type_] + [condition]


def controller_reference(owner: dict) -> dict:
    """An ownerReference making `owner` the controller of another object."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def set_controller_reference(obj: dict, owner: dict) -> dict:
    """Adds `owner` as the controller of `obj`; raises Invalid if another object is
    its controller already (as controller-runtime's SetControllerReference)."""
    refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
    wanted = controller_reference(owner)
    for ref in refs:
        if ref.get("controller") and ref.get("uid") != wanted["uid"]:
            raise Invalid(f"{obj['metadata'].get('name')} is controlled by "
                          f"{ref.get('kind')} {ref.get('name')} already")
    refs[:] = [ref for ref in refs if ref.get("uid") != wanted["uid"]] + [wanted]
    return obj
