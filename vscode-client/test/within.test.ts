import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LATE, within } from '../src/within';

const after = <T>(ms: number, value: T): Promise<T> => new Promise((resolve) => setTimeout(() => resolve(value), ms));

test('an answer within the time is given as it is', async () => {
  assert.equal(await within(after(5, 'rows'), 200), 'rows');
  assert.equal(await within(Promise.resolve(undefined), 0), undefined);
});

test('a slow answer is late, and still comes', async () => {
  const slow = after(60, 'rows');
  assert.equal(await within(slow, 10), LATE);
  assert.equal(await slow, 'rows');
});

test('a failure within the time fails, and a later one is the caller\'s to handle', async () => {
  await assert.rejects(within(Promise.reject(new Error('closed')), 100), /closed/);
  const failing = new Promise((_, reject) => setTimeout(() => reject(new Error('late failure')), 30));
  assert.equal(await within(failing, 5), LATE);
  await assert.rejects(failing, /late failure/);
});
