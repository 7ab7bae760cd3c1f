// Replies from the server are checked on arrival: a server of another version must give a clear
// error, never undefined values in the status bar.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { asCandidates, asDocumentSummary, asPreviewResult, ProtocolError } from '../src/protocol';

describe('server replies', () => {
  test('candidates: a missing label falls back to the id; a wrong shape is a protocol error', () => {
    const [candidate] = asCandidates([{ sessionId: 'abc', label: '', cwd: 5, createdAt: 1, mention: '@[abc](dsh-session:ImFiYyI)' }]);
    assert.equal(candidate.label, 'abc');
    assert.equal(candidate.cwd, null);
    assert.throws(() => asCandidates({ items: [] }), ProtocolError);
    assert.throws(() => asCandidates([{ label: 'no id' }]), /dshSessionReference\.candidates/);
  });

  test('document summary needs all five numbers', () => {
    assert.deepEqual(asDocumentSummary({ mentions: 1, sessions: 1, errors: 0, bytes: 10, tokens: 3, extra: true }), {
      mentions: 1,
      sessions: 1,
      errors: 0,
      bytes: 10,
      tokens: 3,
    });
    assert.throws(() => asDocumentSummary({ mentions: 1 }), /documentSummary/);
    assert.throws(() => asDocumentSummary({ mentions: 1, sessions: 1, errors: 0, bytes: '10', tokens: 3 }), /documentSummary/);
  });

  test('document summary may name the target the server resolved', () => {
    const base = { mentions: 0, sessions: 0, errors: 0, bytes: 0, tokens: 0 };
    assert.equal('target' in asDocumentSummary(base), false);
    assert.equal(asDocumentSummary({ ...base, target: null }).target, null);
    assert.deepEqual(asDocumentSummary({ ...base, target: { sessionId: 's1', label: 'Fix it', found: true } }).target, {
      sessionId: 's1',
      label: 'Fix it',
      found: true,
    });
    assert.deepEqual(asDocumentSummary({ ...base, target: { sessionId: 's1', label: '' } }).target, { sessionId: 's1', label: 's1', found: true });
    assert.deepEqual(asDocumentSummary({ ...base, target: { sessionId: 'typo', label: 'typo', found: false } }).target, {
      sessionId: 'typo',
      label: 'typo',
      found: false,
    });
    assert.equal(asDocumentSummary({ ...base, target: { label: 'no id' } }).target, null);
  });

  test('document summary sizes are null while the document has errors', () => {
    const summary = asDocumentSummary({ mentions: 2, sessions: 1, errors: 1, bytes: null, tokens: null });
    assert.equal(summary.bytes, null);
    assert.equal(summary.tokens, null);
  });

  test('preview needs a uri and a text; ok defaults to true', () => {
    assert.deepEqual(asPreviewResult({ uri: 'dsh-preview:/x', text: 't' }), { uri: 'dsh-preview:/x', text: 't', summary: '', ok: true });
    assert.equal(asPreviewResult({ uri: 'dsh-preview:/x', text: 't', ok: false, summary: 's' }).ok, false);
    assert.throws(() => asPreviewResult({ uri: 'dsh-preview:/x' }), /preview/);
  });
});
