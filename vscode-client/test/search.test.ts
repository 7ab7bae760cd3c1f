// Search-as-you-type in the session pickers: debounced, the stale query cancelled, only the
// newest answer shown.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CancelSource, LatestSearch } from '../src/search';

interface Token {
  cancelled: boolean;
}

class FakeSource implements CancelSource<Token> {
  readonly token: Token = { cancelled: false };
  disposed = false;
  cancel(): void {
    this.token.cancelled = true;
  }
  dispose(): void {
    this.disposed = true;
  }
}

interface Pending {
  query: string;
  token: Token;
  resolve: (value: string) => void;
  reject: (error: unknown) => void;
}

function harness(delayMs = 20): {
  search: LatestSearch<string, Token>;
  pending: Pending[];
  shown: string[];
  failed: string[];
  busy: boolean[];
  sources: FakeSource[];
} {
  const pending: Pending[] = [];
  const shown: string[] = [];
  const failed: string[] = [];
  const busy: boolean[] = [];
  const sources: FakeSource[] = [];
  const search = new LatestSearch<string, Token>(
    {
      run: (query, token) => new Promise((resolve, reject) => pending.push({ query, token, resolve, reject })),
      show: (result, query) => shown.push(`${query}=${result}`),
      fail: (error, query) => failed.push(`${query}:${String(error)}`),
      busy: (value) => busy.push(value),
    },
    () => {
      const source = new FakeSource();
      sources.push(source);
      return source;
    },
    delayMs,
  );
  return { search, pending, shown, failed, busy, sources };
}

const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('LatestSearch', () => {
  test('asks once the typing pauses, with the last query only', async () => {
    const h = harness(20);
    h.search.schedule('f');
    h.search.schedule('fi');
    h.search.schedule('fix');
    assert.equal(h.pending.length, 0);
    await tick(40);
    assert.deepEqual(
      h.pending.map((p) => p.query),
      ['fix'],
    );
    h.pending[0].resolve('rows');
    await tick();
    assert.deepEqual(h.shown, ['fix=rows']);
    assert.deepEqual(h.busy, [true, false]);
    assert.equal(h.sources[0].disposed, true);
    h.search.dispose();
  });

  test('a newer query cancels the one in flight, whose late answer is never shown', async () => {
    const h = harness(0);
    const first = h.search.now('a');
    const second = h.search.now('ab');
    assert.equal(h.pending[0].token.cancelled, true);
    assert.equal(h.pending[1].token.cancelled, false);
    h.pending[1].resolve('new');
    h.pending[0].resolve('old');
    await Promise.all([first, second]);
    assert.deepEqual(h.shown, ['ab=new']);
    assert.equal(h.busy.at(-1), false);
  });

  test('a cancelled query that rejects is not reported as a failure; the newest failure is', async () => {
    const h = harness(0);
    const first = h.search.now('a');
    const second = h.search.now('ab');
    h.pending[0].reject(new Error('cancelled'));
    h.pending[1].reject(new Error('server stopped'));
    await Promise.all([first, second]);
    assert.deepEqual(h.failed, ['ab:Error: server stopped']);
    assert.deepEqual(h.shown, []);
  });

  test('now() runs at once and drops a pending debounced query', async () => {
    const h = harness(20);
    h.search.schedule('typed');
    const done = h.search.now('');
    await tick(40);
    assert.deepEqual(
      h.pending.map((p) => p.query),
      [''],
    );
    h.pending[0].resolve('all');
    await done;
    assert.deepEqual(h.shown, ['=all']);
  });

  test('dispose cancels the query in flight and shows nothing after', async () => {
    const h = harness(0);
    const running = h.search.now('x');
    h.search.dispose();
    assert.equal(h.pending[0].token.cancelled, true);
    h.pending[0].resolve('late');
    await running;
    h.search.schedule('y');
    await tick(10);
    assert.deepEqual(h.shown, []);
    assert.equal(h.pending.length, 1);
  });
});
