// Replies from the server are checked on arrival: a server of another version must give a clear
// error, never undefined values in the status bar.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { readFileSync } from 'node:fs';
import * as path from 'node:path';

import {
  asCandidates,
  asDocumentSummary,
  asInsertMentionResult,
  asPreviewResult,
  asTranscriptResult,
  changedContent,
  CLIENT_COMMANDS,
  isListingOnly,
  isModelTextPreview,
  isRequestCancelled,
  linkedRanges,
  promptOfPreview,
  ProtocolError,
  SERVER_COMMANDS,
  transcriptLinkRanges,
} from '../src/protocol';

describe('server replies', () => {
  test('candidates: a missing label falls back to the id; a wrong shape is a protocol error', () => {
    const [candidate] = asCandidates([{ sessionId: 'abc', label: '', cwd: 5, project: 7, createdAt: 1, mention: '@[abc](dsh-session:ImFiYyI)' }]);
    assert.equal(candidate.label, 'abc');
    assert.equal(candidate.cwd, null);
    assert.equal(candidate.project, null);
    assert.equal(candidate.transcript, undefined);
    // The transcript a row opens is the server's, and only a transcript: never another scheme.
    const [row] = asCandidates([{ sessionId: 'abc', label: 'T', cwd: '/w/tf', project: 'tf', transcript: 'dsh-transcript:/T.txt?abc' }]);
    assert.equal(row.project, 'tf');
    assert.equal(row.transcript, 'dsh-transcript:/T.txt?abc');
    assert.equal(asCandidates([{ sessionId: 'abc', transcript: 'file:///etc/passwd' }])[0].transcript, undefined);
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
    assert.equal(asDocumentSummary({ mentions: 1, sessions: 1, errors: 0, bytes: 10, tokens: 3, tokensExact: true }).tokensExact, true);
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

  test('document summary may give the limit and the sessions referenced within it', () => {
    const base = { mentions: 3, sessions: 2, errors: 0, bytes: 0, tokens: 0 };
    const summary = asDocumentSummary({
      ...base,
      maxReferences: 3,
      references: [{ sessionId: 'a', label: 'Fix it', mentions: 2 }, { sessionId: 'b', label: '' }, { label: 'no id' }, null],
    });
    assert.equal(summary.maxReferences, 3);
    assert.deepEqual(summary.references, [
      { sessionId: 'a', label: 'Fix it', mentions: 2 },
      { sessionId: 'b', label: 'b', mentions: 1 },
    ]);
    assert.equal('references' in asDocumentSummary(base), false);
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

  test('transcript needs a text; uri and title default to empty', () => {
    assert.deepEqual(asTranscriptResult({ uri: 'dsh-transcript:/Fix%20it.txt?s1', text: 'title: Fix it\n', title: 'Fix it' }), {
      uri: 'dsh-transcript:/Fix%20it.txt?s1',
      text: 'title: Fix it\n',
      title: 'Fix it',
    });
    assert.deepEqual(asTranscriptResult({ text: '' }), { uri: '', text: '', title: '' });
    assert.throws(() => asTranscriptResult({ uri: 'dsh-transcript:/x.txt?x' }), /dshSessionReference\.transcript/);
    assert.throws(() => asTranscriptResult(null), ProtocolError);
  });

  test('insertMention says what it inserted and whether the edit was applied', () => {
    assert.deepEqual(asInsertMentionResult({ mention: '@[Fix it](dsh-session:InMxIg)', applied: true, extra: 1 }), {
      mention: '@[Fix it](dsh-session:InMxIg)',
      applied: true,
    });
    assert.equal(asInsertMentionResult({ mention: '@[x](dsh-session:InMxIg)', applied: true, replaced: 2 }).replaced, 2);
    assert.throws(() => asInsertMentionResult({ mention: '@[x](dsh-session:InMxIg)' }), /dshSessionReference\.insertMention/);
    assert.throws(() => asInsertMentionResult({ applied: 'yes', mention: '' }), ProtocolError);
  });
});

describe('document links', () => {
  test('only the links to transcripts count, each with its range', () => {
    const range = { start: { line: 2, character: 13 }, end: { line: 2, character: 90 } };
    assert.deepEqual(
      transcriptLinkRanges([
        { range, target: 'dsh-transcript:/Fix%20it.txt?s1' },
        { range, target: 'https://example.com' },
        { range: { start: { line: 1 }, end: range.end }, target: 'dsh-transcript:/x.txt?x' },
        { range },
        null,
      ]),
      [range],
    );
    assert.deepEqual(transcriptLinkRanges(null), []);
  });

  test('every link the server sends counts as linked, one it resolves later (no target) too', () => {
    const range = { start: { line: 2, character: 13 }, end: { line: 2, character: 90 } };
    const later = { start: { line: 4, character: 0 }, end: { line: 4, character: 70 } };
    assert.deepEqual(
      linkedRanges([
        { range, target: 'dsh-transcript:/Fix%20it.txt?s1' },
        { range: later, target: null, data: { uri: 'file:///p.md', sessionId: 's1' } },
        { range: { start: { line: 1 }, end: range.end } },
        { range, target: 7 },
        null,
      ]),
      [range, later],
    );
    assert.deepEqual(linkedRanges(undefined), []);
  });
});

describe('contentChanged notification', () => {
  test('splits transcripts from previews, drops duplicates and other schemes', () => {
    const changed = changedContent({
      uris: ['dsh-transcript:/A.txt?a', 'dsh-preview:/prompt.md%20(context)?x', 'dsh-transcript:/A.txt?a', 'file:///x.md', 7],
    });
    assert.deepEqual(changed, { transcripts: ['dsh-transcript:/A.txt?a'], previews: ['dsh-preview:/prompt.md%20(context)?x'] });
  });

  test('a malformed notification changes nothing', () => {
    for (const params of [undefined, null, [], { uris: 'dsh-transcript:/A.txt?a' }, { other: [] }]) {
      assert.deepEqual(changedContent(params), { transcripts: [], previews: [] }, JSON.stringify(params));
    }
  });
});

describe('cancelled requests', () => {
  test('only LSP\'s RequestCancelled counts', () => {
    // What vscode-languageclient rejects with when pygls answers a request cancelled at shutdown.
    assert.equal(isRequestCancelled({ code: -32800, message: 'Request with id "419" is canceled' }), true);
    for (const error of [new Error('boom'), { code: -32603 }, { code: '-32800' }, undefined, null, 'cancelled']) {
      assert.equal(isRequestCancelled(error), false, String(error));
    }
  });
});

describe('command ids', () => {
  const manifest = JSON.parse(readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    contributes: { commands: { command: string }[] };
  };

  test("no client command shares an id with a server command (vscode-languageclient registers the server's)", () => {
    const server = new Set<string>(Object.values(SERVER_COMMANDS));
    for (const id of Object.values(CLIENT_COMMANDS)) {
      assert.equal(server.has(id), false, id);
    }
    for (const { command } of manifest.contributes.commands) {
      assert.equal(server.has(command), false, command);
    }
  });

  test('package.json contributes exactly the client commands', () => {
    assert.deepEqual(manifest.contributes.commands.map((item) => item.command).sort(), Object.values(CLIENT_COMMANDS).sort());
  });
});

test('isListingOnly: only an answer that is the one listing row asks again', () => {
  const listing = { label: 'Listing dsh sessions…', data: { listing: true } };
  const session = { label: 'Deploy checklist', data: { sessionId: 's-delta', label: 'Deploy checklist' } };
  assert.equal(isListingOnly({ isIncomplete: true, items: [listing] }), true);
  assert.equal(isListingOnly([listing]), true);
  assert.equal(isListingOnly({ items: [session] }), false);
  assert.equal(isListingOnly({ items: [listing, session] }), false);
  assert.equal(isListingOnly({ items: [{ label: 'x', data: { listing: 'yes' } }] }), false);
  assert.equal(isListingOnly(undefined), false);
  assert.equal(isListingOnly(null), false);
});

test('promptOfPreview / isModelTextPreview: a preview URI names its prompt (the server writes it percent-encoded)', () => {
  // As the server's preview_uri writes them, and as VS Code's Uri.toString() writes them back.
  const context = 'dsh-preview:/prompt.md%20%28context%29.txt?file%3A%2F%2F%2Fw%2Fmy%20dir%2Fprompt.md';
  const model = 'dsh-preview:/prompt.md%20(model%20text).txt?file%3A%2F%2F%2Fw%2Fprompt.md';
  assert.equal(promptOfPreview(context), 'file:///w/my dir/prompt.md');
  assert.equal(promptOfPreview(model), 'file:///w/prompt.md');
  assert.equal(isModelTextPreview(context), false);
  assert.equal(isModelTextPreview(model), true);
  assert.equal(promptOfPreview('dsh-preview:/x.txt'), undefined, 'no query: no prompt');
  assert.equal(promptOfPreview('dsh-preview:/x.txt?%E0%A4%A'), undefined, 'broken encoding: no prompt');
  assert.equal(promptOfPreview('file:///w/prompt.md?x'), undefined, 'not a preview');
});
