// data-hash: a controller written in JavaScript (built with componentize-js).
//
// For every ConfigMap labelled `example.com/hash-data`, writes a short hash of its
// `data` into the label `example.com/data-hash`, so whatever consumes the ConfigMap (a
// Deployment's pod template, a cache key) can tell when the content changed. The hash
// is 32-bit FNV-1a of the data as JSON with its keys sorted, in 8 hex digits.
import { get, patchLabels } from 'wcm:controller/cluster@0.2.0';
import { log } from 'wcm:controller/log@0.2.0';

const OPT_IN = 'example.com/hash-data';
const HASH = 'example.com/data-hash';
const CONFIG_MAP = { group: '', version: 'v1', kind: 'ConfigMap' };

/** 32-bit FNV-1a of the UTF-8 bytes of `text`, as 8 hex digits. */
export function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

/** The data as JSON with sorted keys: the same content always hashes the same. */
function canonical(data) {
  const sorted = {};
  for (const key of Object.keys(data || {}).sort()) sorted[key] = data[key];
  return JSON.stringify(sorted);
}

export const reconciler = {
  register() {
    return {
      name: 'data-hash',
      version: '0.1.0',
      watches: [{ kind: CONFIG_MAP, namespace: undefined, labelSelector: OPT_IN, mapsTo: { tag: 'object' } }],
      permissions: [{ kind: CONFIG_MAP, verbs: ['patch'] }],
      maxConcurrentReconciles: 0,
      resyncPeriodMs: undefined,
    };
  },

  reconcile(req) {
    const ref = { kind: CONFIG_MAP, namespace: req.namespace, name: req.name };
    let configMap;
    try {
      configMap = JSON.parse(get(ref));
    } catch (e) {
      // Host errors arrive as exceptions whose payload is the WIT error case.
      if (e.payload && e.payload.tag === 'not-found') return { tag: 'done' };
      throw e;
    }
    const hash = fnv1a(canonical(configMap.data));
    if ((configMap.metadata.labels || {})[HASH] !== hash) {
      patchLabels(ref, [[HASH, hash]], []);
      log('info', `hashed ${req.namespace}/${req.name}: ${hash}`);
    }
    return { tag: 'done' };
  },
};
