// {{name}}: counts the keys of opted-in ConfigMaps into a label.
import {
  CONFIG_MAP, NotFound, Registration, Verb, Watch, cluster, done, exportController, log,
} from './wasm-controller.js';
import { keysLabel } from './logic.js';

const ENABLED = '{{name}}.example.com/enabled';
const KEYS = '{{name}}.example.com/keys';

export const reconciler = exportController({
  registration() {
    return new Registration('{{name}}', '0.1.0')
      .watch(Watch.all(CONFIG_MAP).labels(ENABLED))
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
    const wanted = keysLabel(configMap);
    if ((configMap.metadata.labels || {})[KEYS] !== wanted) {
      // The Event before the label: once the label is right this branch is not
      // taken again, so an Event recorded after it would be lost to a crash in
      // between (`make test` runs `--faults all`, which finds that).
      const note = `${wanted} keys`;
      cluster.recordEvent(ref, 'KeysCounted', note);
      cluster.patchLabels(ref, { [KEYS]: wanted });
      log.info(`${request.name}: ${note}`);
    }
    return done();
  },
});
