// {{name}}: counts the keys of opted-in ConfigMaps into a label.
import { get, patchLabels, recordEvent } from 'wcm:controller/cluster@0.2.0';
import { log } from 'wcm:controller/log@0.2.0';
import { keysLabel } from './logic.js';

const ENABLED = '{{name}}.example.com/enabled';
const KEYS = '{{name}}.example.com/keys';
const CONFIG_MAP = { group: '', version: 'v1', kind: 'ConfigMap' };

export const reconciler = {
  register() {
    return {
      name: '{{name}}',
      version: '0.1.0',
      watches: [{ kind: CONFIG_MAP, namespace: undefined, labelSelector: ENABLED, mapsTo: { tag: 'object' } }],
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
      // Host errors arrive as exceptions whose payload is the contract's error case.
      if (e.payload && e.payload.tag === 'not-found') return { tag: 'done' }; // deleted meanwhile
      throw e;
    }
    const wanted = keysLabel(configMap);
    if ((configMap.metadata.labels || {})[KEYS] !== wanted) {
      patchLabels(ref, [[KEYS, wanted]], []);
      const note = `${wanted} keys`;
      recordEvent(ref, 'normal', 'KeysCounted', note);
      log('info', `${req.name}: ${note}`);
    }
    return { tag: 'done' };
  },
};
