// The plugin itself, run by `wasm-controller-manager test` on the objects in
// testdata/: what it does must be what testdata/expected.yaml says, and it must end in
// the same state whatever fault strikes (a crash right after a write, a stale cache, a
// late watch event, an API error or timeout). Build {{name}}.wasm first (`make test`
// does); the host binary is $WCM, else wasm-controller-manager on PATH.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

test('the plugin does what testdata expects whatever fault strikes', () => {
  const wcm = process.env.WCM || 'wasm-controller-manager';
  const run = spawnSync(wcm, ['test', '{{name}}.wasm', 'testdata/cluster.yaml',
    '--expect', 'testdata/expected.yaml', '--faults', 'all'], { encoding: 'utf8' });
  assert.equal(run.status, 0, `${run.error || ''}${run.stdout}${run.stderr}`);
});
