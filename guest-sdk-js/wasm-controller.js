// The JavaScript SDK of wasm-controller-manager: write a controller like the Rust
// SDK's. A thin layer over the imports componentize-js generates from the contract
// (`wit/controller.wit`): registration builders, objects as plain objects, one error
// class per error case, helpers for conditions and owner references.
//
//   import { CONFIG_MAP, Registration, Watch, cluster, done, exportController, NotFound }
//     from './wasm-controller.js';
//   export const reconciler = exportController({
//     registration: () => new Registration('keys', '0.1.0').watch(Watch.all(CONFIG_MAP)),
//     reconcile(request) { ...; return done(); },
//   });
//
// Build with `componentize-js index.js -w wit -n controller -d http fetch-event -o plugin.wasm`.
import * as host from 'wcm:controller/cluster@0.2.0';
import { log as hostLog } from 'wcm:controller/log@0.2.0';

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
  PATCH_STATUS: 'patch-status', DELETE: 'delete',
});

// --- errors ---------------------------------------------------------------------------

/** A failed host call, or a reconcile's own failure; `kind` is the contract's case. */
export class ClusterError extends Error {
  constructor(message, kind = 'other') {
    super(message);
    this.name = 'ClusterError';
    this.kind = kind;
  }
}
/** The object does not exist (or is not in the cache yet). */
export class NotFound extends ClusterError { constructor(m) { super(m, 'not-found'); this.name = 'NotFound'; } }
/** Not declared by the plugin, or denied by the cluster's RBAC. */
export class Forbidden extends ClusterError { constructor(m) { super(m, 'forbidden'); this.name = 'Forbidden'; } }
/** Someone else changed or owns what the plugin tried to write. */
export class Conflict extends ClusterError { constructor(m) { super(m, 'conflict'); this.name = 'Conflict'; } }
/** Malformed input: a bad name, label, selector or JSON. */
export class Invalid extends ClusterError { constructor(m) { super(m, 'invalid'); this.name = 'Invalid'; } }
/** The API server or the cache is not reachable or ready; retry later. */
export class Unavailable extends ClusterError { constructor(m) { super(m, 'unavailable'); this.name = 'Unavailable'; } }

const BY_CASE = {
  'not-found': NotFound, forbidden: Forbidden, conflict: Conflict,
  invalid: Invalid, unavailable: Unavailable,
};

/** Calls a host import, turning its error (a thrown `payload`) into a ClusterError. */
function call(fn, ...args) {
  try {
    return fn(...args);
  } catch (e) {
    if (!e || !e.payload || typeof e.payload.tag !== 'string') throw e;
    const Case = BY_CASE[e.payload.tag];
    throw Case ? new Case(e.payload.val) : new ClusterError(e.payload.val, e.payload.tag);
  }
}

// --- registration ---------------------------------------------------------------------

/** One kind the plugin watches, and how a change becomes a key. */
export class Watch {
  constructor(kind) {
    this.kind = kind;
    this.namespace = undefined;
    this.labelSelector = undefined;
    this.mapsTo = { tag: 'object' };
  }
  /** Every object of `kind`, each waking its own key. */
  static all(kind) { return new Watch(kind); }
  inNamespace(namespace) { this.namespace = namespace; return this; }
  /** Only objects matching a label selector (`app=web`, `example.com/opt-in`). */
  labels(selector) { this.labelSelector = selector; return this; }
  /** Every change wakes the one key `key` (for aggregates such as counts). */
  fixedKey(key) { this.mapsTo = { tag: 'fixed', val: key }; return this; }
  /** A change wakes the object's controller owner of kind `owner`. */
  ownedBy(owner) { this.mapsTo = { tag: 'controller-owner', val: owner }; return this; }
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
  }
  watch(w) { this.watches.push(w); return this; }
  permit(kind, ...verbs) { this.permissions.push({ kind, verbs }); return this; }
  concurrency(n) { this.maxConcurrentReconciles = n; return this; }
  resyncEvery(seconds) { this.resyncPeriodMs = BigInt(Math.round(seconds * 1000)); return this; }
}

// --- reconcile ------------------------------------------------------------------------

/** Nothing to do until something changes. */
export const done = () => ({ tag: 'done' });
/** Reconcile this key again after `seconds` (an earlier change still wakes it). */
export const requeueAfter = (seconds) => ({ tag: 'requeue-after', val: BigInt(Math.round(seconds * 1000)) });

/** The key to reconcile; `object()` is the object it names (undefined for a fixed key). */
function request(req) {
  return {
    ...req,
    object: () => (req.kind ? { kind: req.kind, namespace: req.namespace, name: req.name } : undefined),
  };
}

/**
 * The `reconciler` export for a controller `{ registration(), reconcile(request) }`.
 * A ClusterError thrown by `reconcile` is returned as its case (the host logs it and
 * retries the key with backoff); any other exception is logged with its stack and
 * returned as `other`, so the instance does not trap.
 */
export function exportController(controller) {
  return {
    register() {
      return controller.registration();
    },
    reconcile(req) {
      try {
        return controller.reconcile(request(req));
      } catch (e) {
        if (e instanceof ClusterError) throw { tag: e.kind, val: e.message };
        log.error(`${e && e.stack ? e.stack : e}`);
        throw { tag: 'other', val: `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}` };
      }
    },
  };
}

// --- the cluster ----------------------------------------------------------------------

/** Reads from the host's caches and writes as the plugin (objects are plain objects). */
export const cluster = {
  /** One object of a watched kind; throws NotFound if it is not there. */
  get: (ref) => JSON.parse(call(host.get, ref)),
  /** Objects of a watched kind, sorted by namespace and name. */
  list: (kind, namespace = undefined, labelSelector = undefined) =>
    call(host.list, kind, namespace, labelSelector).map((o) => JSON.parse(o)),
  /** Sets labels (an object of key → value) and removes keys, as the plugin. */
  patchLabels: (ref, set, remove = []) =>
    call(host.patchLabels, ref, Object.entries(set).sort(), remove),
  /** Records an Event about `ref` (Normal, or Warning with `{ warning: true }`). */
  recordEvent: (ref, reason, note, { warning = false } = {}) =>
    call(host.recordEvent, ref, warning ? 'warning' : 'normal', reason, note),
  /** Server-side applies a whole object; returns it as stored. */
  apply: (object, force) => JSON.parse(call(host.apply, JSON.stringify(object), force)),
  /** Merges `status` into the object's status subresource. */
  patchStatus: (ref, status) => call(host.patchStatus, ref, JSON.stringify(status)),
  /** Deletes the object (`background`, `foreground` or `orphan` for its dependents). */
  delete: (ref, propagation = 'background') => call(host.delete, ref, propagation),
};

/** Log lines into the host's log, tagged with the plugin and key. */
export const log = {
  debug: (message) => hostLog('debug', message),
  info: (message) => hostLog('info', message),
  warn: (message) => hostLog('warn', message),
  error: (message) => hostLog('error', message),
};

// --- helpers --------------------------------------------------------------------------

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
