// What the insert picker says about maxReferences, from the server's own counts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { isFull, isReferenced, mentionLimit, pickerPlaceholder, pickerTitle, replaceQuestion, wouldExceed } from '../src/mentionLimit';
import { asDocumentSummary } from '../src/protocol';

const base = { mentions: 4, sessions: 3, errors: 0, bytes: 10, tokens: 3 };
const three = [
  { sessionId: 'a', label: 'Earlier work', mentions: 2 },
  { sessionId: 'b', label: 'Notes: zeta mig follow-up', mentions: 1 },
  { sessionId: 'c', label: 'Fix the zstd reader', mentions: 1 },
];

describe('mentionLimit', () => {
  test('an older server that does not count says nothing, and nothing is refused', () => {
    const limit = mentionLimit(asDocumentSummary(base));
    assert.equal(limit, undefined);
    assert.equal(wouldExceed(limit, 'd'), false);
    assert.equal(pickerTitle(limit), 'DSH: Insert session mention');
    assert.equal(pickerPlaceholder(limit), 'Type a title, id or folder: the session to mention at the cursor');
  });

  test('room left: the title counts, a pick just inserts', () => {
    const limit = mentionLimit(asDocumentSummary({ ...base, maxReferences: 3, references: three.slice(0, 2) }));
    assert.ok(limit);
    assert.equal(isFull(limit), false);
    assert.equal(pickerTitle(limit), 'DSH: Insert session mention (2 of 3 sessions referenced)');
    assert.equal(wouldExceed(limit, 'd'), false);
    assert.equal(isReferenced(limit, 'a') && !isReferenced(limit, 'd'), true);
  });

  test('full: the placeholder says so before the pick; only a new session would exceed', () => {
    const limit = mentionLimit(asDocumentSummary({ ...base, maxReferences: 3, references: three }));
    assert.ok(limit);
    assert.equal(pickerTitle(limit), 'DSH: Insert session mention (3 of 3 sessions referenced)');
    assert.match(pickerPlaceholder(limit), /^Type a title, id or folder\. This prompt references 3 sessions, the most a message may: picking another offers to replace one$/);
    assert.equal(wouldExceed(limit, 'b'), false); // a third mention of a referenced session adds none
    assert.equal(wouldExceed(limit, 'd'), true);
    const one = mentionLimit(asDocumentSummary({ ...base, maxReferences: 1, references: three.slice(0, 1) }));
    assert.ok(one);
    assert.equal(pickerTitle(one), 'DSH: Insert session mention (1 of 1 session referenced)');
    assert.equal(wouldExceed(one, 'b'), true);
  });

  test('a pick past the limit asks which session it replaces, by title, or to cancel', () => {
    const limit = mentionLimit(asDocumentSummary({ ...base, maxReferences: 3, references: three }));
    assert.ok(limit);
    const question = replaceQuestion(limit, 'Deploy checklist');
    assert.equal(question.title, '“Deploy checklist” would be session 4: a message may reference at most 3 sessions');
    assert.deepEqual(
      question.choices.map((choice) => [choice.label, choice.description, choice.replace]),
      [
        ['$(replace) Replace “Earlier work”', '2 mentions', 'a'],
        ['$(replace) Replace “Notes: zeta mig follow-up”', '1 mention', 'b'],
        ['$(replace) Replace “Fix the zstd reader”', '1 mention', 'c'],
        ['$(close) Cancel', 'leave the prompt as it is', undefined],
      ],
    );
    assert.equal(question.choices[0].detail, 'Its mentions become mentions of “Deploy checklist”');
    assert.equal(question.choices[1].detail, 'Its mention becomes a mention of “Deploy checklist”');
  });
});
