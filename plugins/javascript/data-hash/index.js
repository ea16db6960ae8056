// data-hash: a controller written in JavaScript (built with componentize-js).
//
// For every ConfigMap labelled `example.com/hash-data`, writes a short hash of its
// `data` into the label `example.com/data-hash`, so whatever consumes the ConfigMap (a
// Deployment's pod template, a cache key) can tell when the content changed. The hash
// is 32-bit FNV-1a of the data as JSON with its keys sorted, in 8 hex digits.
import {
  CONFIG_MAP, NotFound, Registration, Verb, Watch, cluster, done, exportController, log,
} from '../../../guest-sdk-js/wasm-controller.js';

const OPT_IN = 'example.com/hash-data';
const HASH = 'example.com/data-hash';

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

export const reconciler = exportController({
  registration() {
    return new Registration('data-hash', '0.1.0')
      .watch(Watch.all(CONFIG_MAP).labels(OPT_IN))
      .permit(CONFIG_MAP, Verb.PATCH);
  },

  reconcile(request) {
    const ref = request.object();
    let configMap;
    try {
      configMap = cluster.get(ref);
    } catch (e) {
      if (e instanceof NotFound) return done(); // deleted meanwhile
      throw e;
    }
    const hash = fnv1a(canonical(configMap.data));
    if ((configMap.metadata.labels || {})[HASH] !== hash) {
      cluster.patchLabels(ref, { [HASH]: hash });
      log.info(`hashed ${request.namespace}/${request.name}: ${hash}`);
    }
    return done();
  },
});
