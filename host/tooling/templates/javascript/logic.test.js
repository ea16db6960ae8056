import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keysLabel } from './logic.js';

test('the label is the number of data keys', () => {
  assert.equal(keysLabel({}), '0');
  assert.equal(keysLabel({ data: { a: '1' } }), '1');
});
