// The JavaScript SDK of wasm-controller-manager: write a controller like the Rust
// SDK's. A thin layer over the imports componentize-js generates from the contract
// (`wit/controller.wit`, wcm:controller@0.3): registration builders, objects as plain
// objects, one error class per error code (with the API server's status, retry-after
// and causes), terminal errors, Events with an action and a related object, structured
// log fields, helpers for conditions and owner references.
//
//   import { CONFIG_MAP, Registration, Watch, cluster, done, exportController, NotFound }
//     from './wasm-controller.js';
//   export const reconciler = exportController({
//     registration: () => new Registration('keys', '0.1.0').watch(Watch.all(CONFIG_MAP)),
//     reconcile(request) { ...; return done(); },
//   });
//
// Build with `componentize-js index.js -w wit -n controller -d http fetch-event -o plugin.wasm`.
import * as host from 'wcm:controller/cluster@0.3.1';
import { log as hostLog } from 'wcm:controller/log@0.3.1';
import * as hostMetrics from 'wcm:controller/metrics@0.3.1';
import { settings as hostSettings } from 'wcm:controller/config@0.3.1';

export const gvk = (group, version, kind) => ({ group, version, kind });
export const POD = gvk('', 'v1', 'Pod');
export const NODE = gvk('', 'v1', 'Node');
export const CONFIG_MAP = gvk('', 'v1', 'ConfigMap');
export const SECRET = gvk('', 'v1', 'Secret');
export const SERVICE = gvk('', 'v1', 'Service');
export const NAMESPACE = gvk('', 'v1', 'Namespace');
export const DEPLOYMENT = gvk('apps', 'v1', 'Deployment');
export const STATEFUL_SET = gvk('apps', 'v1', 'StatefulSet');
export const DAEMON_SET = gvk('apps', 'v1', 'DaemonSet');
export const REPLICA_SET = gvk('apps', 'v1', 'ReplicaSet');
export const JOB = gvk('batch', 'v1', 'Job');

/** The verbs a plugin may declare on a kind. */
export const Verb = Object.freeze({
  GET: 'get', LIST: 'list', PATCH: 'patch', APPLY: 'apply',
  PATCH_STATUS: 'patch/status', PATCH_SCALE: 'patch/scale', DELETE: 'delete',
  CREATE: 'create', UPDATE: 'update',
});

// --- errors ---------------------------------------------------------------------------

/**
 * A failed host call, or a reconcile's own failure; `kind` is the contract's code.
 * `status` is the API server's HTTP status (undefined when the host refused before any
 * call), `retryAfterMs` how long it asked to wait, `causes` its field-level reasons
 * (`{ field, reason, message, manager }`, `manager` for apply conflicts). Thrown from
 * `reconcile`, it is retried with backoff unless `terminal` is set (see `terminal()`).
 */
export class ClusterError extends Error {
  constructor(message, kind = 'other', { status, retryAfterMs, causes = [] } = {}) {
    super(message);
    this.name = 'ClusterError';
    this.kind = kind;
    this.status = status;
    this.retryAfterMs = retryAfterMs;
    this.causes = causes;
    this.terminal = false;
  }
}
/** The object does not exist (or is not in the cache yet). */
export class NotFound extends ClusterError { constructor(m, d) { super(m, 'not-found', d); this.name = 'NotFound'; } }
/** A create found the name taken. */
export class AlreadyExists extends ClusterError { constructor(m, d) { super(m, 'already-exists', d); this.name = 'AlreadyExists'; } }
/** Not declared by the plugin, or denied by the cluster's RBAC. */
export class Forbidden extends ClusterError { constructor(m, d) { super(m, 'forbidden', d); this.name = 'Forbidden'; } }
/** Someone else changed or owns what the plugin tried to write. */
export class Conflict extends ClusterError { constructor(m, d) { super(m, 'conflict', d); this.name = 'Conflict'; } }
/** Malformed input: a bad name, label, selector or JSON. */
export class Invalid extends ClusterError { constructor(m, d) { super(m, 'invalid', d); this.name = 'Invalid'; } }
/** The API server or the cache is not reachable or ready; retry later. */
export class Unavailable extends ClusterError { constructor(m, d) { super(m, 'unavailable', d); this.name = 'Unavailable'; } }

const BY_CODE = {
  'not-found': NotFound, 'already-exists': AlreadyExists, forbidden: Forbidden,
  conflict: Conflict, invalid: Invalid, unavailable: Unavailable,
};

/**
 * `error`, marked terminal: thrown from `reconcile`, the host records it and does not
 * retry the key until something queues it again (`throw terminal(new Invalid(...))`).
 */
export function terminal(error) {
  error.terminal = true;
  return error;
}

/** Calls a host import, turning its error (a thrown `payload`) into a ClusterError. */
function call(fn, ...args) {
  try {
    return fn(...args);
  } catch (e) {
    if (!e || !e.payload || typeof e.payload.code !== 'string') throw e;
    const { code, message, status, retryAfterMs, causes } = e.payload;
    const Code = BY_CODE[code];
    const details = { status, retryAfterMs, causes };
    throw Code ? new Code(message, details) : new ClusterError(message, code, details);
  }
}

/** A ClusterError as the contract's error record. */
function toWit(e) {
  return {
    code: e.kind in BY_CODE ? e.kind : 'other',
    message: e.message,
    status: e.status,
    retryAfterMs: e.retryAfterMs,
    causes: (e.causes || []).map((c) => ({
      field: c.field || '', reason: c.reason || '', message: c.message || '', manager: c.manager,
    })),
  };
}

// --- registration ---------------------------------------------------------------------

/** One kind the plugin watches, and how a change becomes a key. */
export class Watch {
  constructor(kind) {
    this.kind = kind;
    this.namespaces = [];
    this.labelSelector = undefined;
    this.fieldSelector = undefined;
    this.onlyMetadata = false;
    this.predicates = [];
    this.mapsTo = { tag: 'object' };
  }
  /** Every object of `kind`, each waking its own key. */
  static all(kind) { return new Watch(kind); }
  /** Only objects in these namespaces (each is an informer of its own). */
  inNamespace(...namespaces) { this.namespaces.push(...namespaces); return this; }
  /** Only objects matching a label selector (`app=web`, `example.com/opt-in`). */
  labels(selector) { this.labelSelector = selector; return this; }
  /** Only objects matching a field selector (`spec.nodeName=node-1`), evaluated by the API server. */
  fields(selector) { this.fieldSelector = selector; return this; }
  /** Hold only apiVersion, kind and metadata of the objects (no spec, no status). */
  metadataOnly() { this.onlyMetadata = true; return this; }
  /**
   * Queue an update only when one of these holds: `generation-changed`, `labels-changed`,
   * `annotations-changed`, `finalizers-changed`, `deletion-started`. Creates, deletes and
   * resyncs always queue.
   */
  when(...predicates) { this.predicates.push(...predicates); return this; }
  /** Every change wakes the one key `key` (for aggregates such as counts). */
  fixedKey(key) { this.mapsTo = { tag: 'fixed', val: key }; return this; }
  /** A change wakes the object's controller owner of kind `owner`. */
  ownedBy(owner) { this.mapsTo = { tag: 'controller-owner', val: owner }; return this; }
  /** The contract's `watch` record. */
  toWit() {
    return {
      kind: this.kind,
      namespaces: this.namespaces,
      labelSelector: this.labelSelector,
      fieldSelector: this.fieldSelector,
      metadataOnly: this.onlyMetadata,
      predicates: this.predicates,
      mapsTo: this.mapsTo,
    };
  }
}

/** Who the plugin is and what it needs; built with chained calls. */
export class Registration {
  constructor(name, version) {
    this.name = name;
    this.version = version;
    this.watches = [];
    this.permissions = [];
    this.maxConcurrentReconciles = 0;
    this.resyncPeriodMs = undefined;
    this.metrics = [];
  }
  watch(w) { this.watches.push(w); return this; }
  permit(kind, ...verbs) { this.permissions.push({ kind, verbs }); return this; }
  concurrency(n) { this.maxConcurrentReconciles = n; return this; }
  resyncEvery(seconds) { this.resyncPeriodMs = BigInt(Math.round(seconds * 1000)); return this; }
  /** Declares a counter, exported as `wcm_plugin_<plugin>_<name>_total`. */
  counter(name, help, ...labels) { return this.#metric(name, help, 'counter', labels, []); }
  /** Declares a gauge. */
  gauge(name, help, ...labels) { return this.#metric(name, help, 'gauge', labels, []); }
  /** Declares a histogram; `buckets` are upper bounds (empty: 5 ms to 10 s). */
  histogram(name, help, labels = [], buckets = []) {
    return this.#metric(name, help, 'histogram', labels, buckets);
  }
  #metric(name, help, kind, labels, buckets) {
    this.metrics.push({ name, help, kind, labels, buckets: Float64Array.from(buckets) });
    return this;
  }
}

// --- reconcile ------------------------------------------------------------------------

/** Nothing to do until something changes. */
export const done = () => ({ tag: 'done' });
/** Reconcile this key again after `seconds` (an earlier change still wakes it). */
export const requeueAfter = (seconds) => ({ tag: 'requeue-after', val: BigInt(Math.round(seconds * 1000)) });
/** Reconcile this key again after its backoff, without an error ("not ready yet"). */
export const requeue = () => ({ tag: 'requeue' });

/** The key to reconcile; `object()` is the object it names (undefined for a fixed key). */
function request(req) {
  return {
    ...req,
    object: () => (req.kind ? { kind: req.kind, namespace: req.namespace, name: req.name } : undefined),
  };
}

/**
 * The `reconciler` export for a controller `{ registration(), reconcile(request) }`.
 * A ClusterError thrown by `reconcile` is returned as its code (the host logs it and
 * retries the key with backoff, or records it and stops if it is `terminal`); any
 * other exception is logged with its stack and returned as `other`, so the instance
 * does not trap.
 */
export function exportController(controller) {
  return {
    register() {
      const registration = controller.registration();
      const watches = registration.watches.map((w) => (w instanceof Watch ? w.toWit() : w));
      return { ...registration, watches };
    },
    reconcile(req) {
      try {
        return controller.reconcile(request(req));
      } catch (e) {
        if (e instanceof ClusterError) throw { tag: e.terminal ? 'terminal' : 'retry', val: toWit(e) };
        log.error(`${e && e.stack ? e.stack : e}`);
        const message = `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`;
        throw { tag: 'retry', val: toWit(new ClusterError(message)) };
      }
    },
  };
}

// --- the cluster ----------------------------------------------------------------------

/** Reads from the host's caches and writes as the plugin (objects are plain objects). */
export const cluster = {
  /**
   * One object: of a watched kind from the cache, of a kind declared with `Verb.GET`
   * but not watched live from the API server; throws NotFound if it is not there.
   */
  get: (ref) => JSON.parse(call(host.get, ref)),
  /** Objects of a watched kind, sorted by namespace and name. */
  list: (kind, namespace = undefined, labelSelector = undefined) =>
    call(host.list, kind, namespace, labelSelector).map((o) => JSON.parse(o)),
  /**
   * The first `limit` objects `list` would return: a batch out of thousands, the rest
   * never copied into the plugin. Ask for one more than the batch to learn whether
   * more remain.
   */
  listFirst: (kind, limit, namespace = undefined, labelSelector = undefined) =>
    call(host.listFirst, kind, namespace, labelSelector, limit).map((o) => JSON.parse(o)),
  /**
   * How many objects `list` would return (a Number), counted by the host: nothing is
   * copied into the plugin or decoded.
   */
  count: (kind, namespace = undefined, labelSelector = undefined) =>
    Number(call(host.count, kind, namespace, labelSelector)),
  /** Sets labels (an object of key → value) and removes keys, as the plugin. */
  patchLabels: (ref, set, remove = []) =>
    call(host.patchLabels, ref, Object.entries(set).sort(), remove),
  /**
   * Adds and removes finalizers, leaving other controllers' alone (guarded by the
   * object's resourceVersion, tried again on a conflict).
   */
  patchFinalizers: (ref, add = [], remove = []) => call(host.patchFinalizers, ref, add, remove),
  /**
   * Records an Event about `ref` (Normal, or Warning with `{ warning: true }`);
   * `action` (PascalCase, default `Reconcile`) says what the plugin did, `related`
   * names a second object it involved.
   */
  recordEvent: (ref, reason, note, { warning = false, action = '', related = undefined } = {}) =>
    call(host.recordEvent, {
      regarding: ref, related, type: warning ? 'warning' : 'normal', reason, action, note,
    }),
  /** Server-side applies a whole object; returns it as stored. */
  apply: (object, force) => JSON.parse(call(host.apply, JSON.stringify(object), force)),
  /** Creates the object (named, or with metadata.generateName); returns it as stored. */
  create: (object) => JSON.parse(call(host.create, JSON.stringify(object))),
  /**
   * Patches the object (or its `status` or `scale`): a merge patch (an object) or, with
   * `{ type: 'json' }`, a JSON patch (a list of operations); returns what is stored.
   */
  patch: (ref, patch, { type = 'merge', subresource = undefined } = {}) =>
    JSON.parse(call(host.patch, ref, type, JSON.stringify(patch), subresource)),
  /** Replaces an object read earlier (it carries its resourceVersion); Conflict if it changed. */
  update: (object) => JSON.parse(call(host.update, JSON.stringify(object))),
  /** Merges `status` into the object's status subresource. */
  patchStatus: (ref, status) => call(host.patchStatus, ref, JSON.stringify(status)),
  /**
   * Deletes the object (`background`, `foreground` or `orphan` for its dependents);
   * with `{ uid, resourceVersion }` only if it is still that object at that version
   * (Conflict otherwise).
   */
  delete: (ref, propagation = 'background', { uid, resourceVersion } = {}) =>
    call(host.delete, ref, { propagation, uid, resourceVersion }),
};

/**
 * Log lines into the host's log, tagged with the plugin and key; an object of fields
 * becomes the line's fields (`log.info('counted', { pods: 3 })`).
 */
const fieldList = (fields) => Object.entries(fields).map(([k, v]) => [k, `${v}`]);
/**
 * The plugin's settings from the operator (`<plugin>.settings.json` or `.yaml` beside
 * the plugin file) as an object, or undefined; readable in `registration` too.
 */
export function settings() {
  const text = hostSettings();
  return text === undefined || text === null ? undefined : JSON.parse(text);
}

/** Updates of the declared metrics: one label value per declared label, in order. */
export const metrics = {
  /** Adds `value` to a counter (at least 0) or a gauge. */
  add: (name, value, ...labels) => call(hostMetrics.add, name, labels, value),
  /** Adds 1 to a counter. */
  inc: (name, ...labels) => call(hostMetrics.add, name, labels, 1),
  /** Sets a gauge. */
  set: (name, value, ...labels) => call(hostMetrics.set, name, labels, value),
  /** Observes one value of a histogram. */
  observe: (name, value, ...labels) => call(hostMetrics.observe, name, labels, value),
};

export const log = {
  debug: (message, fields = {}) => hostLog('debug', message, fieldList(fields)),
  info: (message, fields = {}) => hostLog('info', message, fieldList(fields)),
  warn: (message, fields = {}) => hostLog('warn', message, fieldList(fields)),
  error: (message, fields = {}) => hostLog('error', message, fieldList(fields)),
};

// --- helpers --------------------------------------------------------------------------

/**
 * The usual finalizer pattern: while `object` lives, adds `finalizer` (once) and returns
 * true; once it is being deleted and still carries `finalizer`, calls `cleanup()` and
 * then removes `finalizer` (so Kubernetes can delete it) and returns false. A `cleanup`
 * that throws keeps the finalizer, and the key is retried.
 */
export function finalize(ref, object, finalizer, cleanup) {
  const meta = object.metadata || {};
  const carries = (meta.finalizers || []).includes(finalizer);
  if (meta.deletionTimestamp) {
    if (carries) {
      cleanup();
      cluster.patchFinalizers(ref, [], [finalizer]);
    }
    return false;
  }
  if (!carries) cluster.patchFinalizers(ref, [finalizer], []);
  return true;
}

/** The current time as Kubernetes writes it (RFC 3339, seconds, UTC). */
export const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/**
 * Conditions with `type` set; `lastTransitionTime` moves only when the status changes
 * (as meta.SetStatusCondition does).
 */
export function setCondition(conditions, { type, status, reason, message, observedGeneration }) {
  const previous = conditions.find((c) => c.type === type);
  const changed = !previous || previous.status !== status;
  const condition = {
    type, status, reason, message,
    lastTransitionTime: changed ? now() : previous.lastTransitionTime,
  };
  if (observedGeneration !== undefined) condition.observedGeneration = observedGeneration;
  return [...conditions.filter((c) => c.type !== type), condition];
}

/** An ownerReference making `owner` the controller of another object. */
export function controllerReference(owner) {
  const { name, uid } = owner.metadata;
  return { apiVersion: owner.apiVersion, kind: owner.kind, name, uid, controller: true, blockOwnerDeletion: true };
}

/**
 * Adds `owner` as the controller of `object`; throws Invalid if another object is its
 * controller already (as controller-runtime's SetControllerReference).
 */
export function setControllerReference(object, owner) {
  object.metadata = object.metadata || {};
  const refs = object.metadata.ownerReferences || [];
  const wanted = controllerReference(owner);
  const other = refs.find((r) => r.controller && r.uid !== wanted.uid);
  if (other) throw new Invalid(`${object.metadata.name} is controlled by ${other.kind} ${other.name} already`);
  object.metadata.ownerReferences = [...refs.filter((r) => r.uid !== wanted.uid), wanted];
  return object;
}
