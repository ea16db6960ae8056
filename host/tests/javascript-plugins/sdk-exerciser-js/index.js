// sdk-exerciser-js, a JavaScript test plugin: the JavaScript SDK's calls, errors and
// helpers, the twin of host/tests/python-plugins/sdk-exerciser-py (see its docstring):
// a controlled ConfigMap per Deployment labelled `wcm.test/sdk`, a `Ready` condition,
// a Conflict (action, related object, status and causes) and a NotFound recorded as
// Events, the count of its Deployments (`count`) and the first one's name
// (`listFirst`) in the ConfigMap's data, a log line with a field, the finalizer `wcm.test/sdk` kept on the Deployment,
// an Error thrown for `wcm.test/sdk=raise`, which the
// SDK returns to the host as `other`, and a terminal Invalid for `wcm.test/sdk=terminal`.
import {
  CONFIG_MAP, Conflict, DEPLOYMENT, Invalid, NotFound, Registration, Verb, Watch, cluster,
  done, exportController, finalize, log, metrics, setCondition, setControllerReference,
  settings as operatorSettings, terminal,
} from '../../../../guest-sdk-js/wasm-controller.js';

const SDK = 'wcm.test/sdk';

export const reconciler = exportController({
  registration() {
    return new Registration('sdk-exerciser-js', '0.1.0')
      .watch(Watch.all(DEPLOYMENT).labels(SDK))
      .watch(Watch.all(CONFIG_MAP).labels(SDK).ownedBy(DEPLOYMENT))
      // Every watch option across the boundary (the host checks each at load).
      .watch(Watch.all(DEPLOYMENT).inNamespace('sdk-elsewhere', 'sdk-other').labels(SDK)
        .fields('metadata.name!=ignored').metadataOnly().when('generation-changed', 'labels-changed'))
      .permit(CONFIG_MAP, Verb.APPLY)
      .permit(DEPLOYMENT, Verb.PATCH_STATUS, Verb.PATCH)
      .counter('reconciled', 'Deployments reconciled', 'namespace')
      .gauge('replicas', 'Replicas of the last Deployment')
      .histogram('label_count', 'Labels per Deployment', [], [1, 2, 4]);
  },

  reconcile(request) {
    const ref = request.object();
    let deployment;
    try {
      deployment = cluster.get(ref);
    } catch (e) {
      if (e instanceof NotFound) return done();
      throw e;
    }
    const meta = deployment.metadata;
    if (operatorSettings() !== undefined) log.warn('settings where the test kit gives none');
    metrics.inc('reconciled', meta.namespace);
    metrics.set('replicas', deployment.spec.replicas ?? 1);
    metrics.observe('label_count', Object.keys(meta.labels ?? {}).length);
    if (!finalize(ref, deployment, SDK, () => {})) return done();
    if (meta.labels[SDK] === 'raise') throw new RangeError('asked to fail');
    if (meta.labels[SDK] === 'terminal') throw terminal(new Invalid('asked to fail for good'));
    // Its Deployments here, counted by the host; the first of them alone.
    const labelled = cluster.count(DEPLOYMENT, meta.namespace, SDK);
    const [first] = cluster.listFirst(DEPLOYMENT, 1, meta.namespace, SDK);
    const settings = {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: `${meta.name}-settings`, namespace: meta.namespace, labels: { [SDK]: '' } },
      data: {
        replicas: String(deployment.spec.replicas ?? 1), deployments: String(labelled),
        first: first.metadata.name,
      },
    };
    cluster.apply(setControllerReference(settings, deployment), true);
    const conditions = setCondition((deployment.status || {}).conditions || [], {
      type: 'Ready', status: 'True', reason: 'Exercised', message: 'settings applied',
      observedGeneration: meta.generation,
    });
    cluster.patchStatus(ref, { conditions });
    // A JSON patch guarded by a test of the generation it read.
    cluster.patch(ref, [
      { op: 'test', path: '/metadata/generation', value: meta.generation },
      { op: 'add', path: '/metadata/labels/wcm.test~1exercised', value: 'yes' },
    ], { type: 'json' });
    const shared = {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: 'shared', namespace: meta.namespace }, data: { owner: meta.name },
    };
    try {
      cluster.apply(shared, false);
    } catch (e) {
      if (!(e instanceof Conflict)) throw e;
      const owners = e.causes.map((c) => `${c.field} by ${c.manager}`).join(', ');
      const related = { kind: CONFIG_MAP, namespace: meta.namespace, name: 'shared' };
      cluster.recordEvent(ref, 'Conflict', `${e.status}: ${owners}`, { warning: true, action: 'Apply', related });
    }
    try {
      cluster.get({ kind: CONFIG_MAP, namespace: meta.namespace, name: 'missing' });
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      cluster.recordEvent(ref, 'NotFound', e.message);
    }
    log.info('exercised', { deployment: meta.name });
    return done();
  },
});
