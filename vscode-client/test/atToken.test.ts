// The `@` token the extension's own "Starting dsh…" row answers, as the server finds it.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { atToken } from '../src/atToken';

describe('atToken', () => {
  test('an @ at the start or after whitespace, up to the cursor', () => {
    assert.deepEqual(atToken('@'), { start: 0, typed: '@' });
    assert.deepEqual(atToken('What did we decide about @mig'), { start: 25, typed: '@mig' });
    assert.deepEqual(atToken('see\t@文档'), { start: 4, typed: '@文档' });
  });

  test('not a mention written by hand, a quoted file search, an address or a finished word', () => {
    for (const before of ['see @[', 'see @[label](', 'see @"file', 'mail me@example.org', 'see @mig ', 'plain text', '']) {
      assert.equal(atToken(before), undefined, before);
    }
  });
});
