// Bounded crash restarts, on a fake clock.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { RestartPolicy } from '../src/restartPolicy';

describe('RestartPolicy', () => {
  test('allows a bounded number of restarts inside the window, then stops', () => {
    let now = 0;
    const policy = new RestartPolicy(3, 180_000, () => now);
    assert.deepEqual([1, 2, 3, 4].map(() => policy.crashed().restart), [true, true, true, false]);
    now += 10_000;
    assert.equal(policy.crashed().restart, false);
  });

  test('crashes older than the window are forgotten', () => {
    let now = 0;
    const policy = new RestartPolicy(3, 180_000, () => now);
    for (let i = 0; i < 3; i++) {
      policy.crashed();
      now += 70_000;
    }
    // The first crash (t=0) left the window at t=210s; the ones at 70 s and 140 s remain.
    const decision = policy.crashed();
    assert.equal(decision.crashes, 3);
    assert.equal(decision.restart, true);
    assert.equal(policy.crashed().restart, false);
  });

  test('a user restart forgives earlier crashes', () => {
    const policy = new RestartPolicy(1, 180_000, () => 0);
    policy.crashed();
    assert.equal(policy.crashed().restart, false);
    policy.reset();
    assert.equal(policy.crashed().restart, true);
  });
});
