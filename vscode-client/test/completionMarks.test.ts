// The places where the extension must not ask VS Code for the popup again (startupCompletion.ts).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CompletionMarks } from '../src/completionMarks';

describe('CompletionMarks', () => {
  test('a completion on its way to the server is not asked again, one that ended without rows may be', () => {
    const marks = new CompletionMarks();
    const ended = marks.ask('prompt.md#3:2:5');
    assert.equal(marks.settled('prompt.md#3:2:5'), true);
    assert.equal(marks.settled('prompt.md#4:2:6'), false); // typed on: another place
    ended();
    assert.equal(marks.settled('prompt.md#3:2:5'), false);
  });

  test('rows answered at a place settle it; a later question elsewhere does not unsettle it', () => {
    const marks = new CompletionMarks();
    const first = marks.ask('a#1:0:1');
    marks.answer('a#1:0:1');
    first();
    assert.equal(marks.settled('a#1:0:1'), true);
    const second = marks.ask('a#2:0:2');
    first(); // an earlier question ending late clears nothing of the later one
    assert.equal(marks.settled('a#2:0:2'), true);
    second();
    assert.equal(marks.settled('a#2:0:2'), false);
    assert.equal(marks.settled('a#1:0:1'), true);
  });

  test('a question asked again at the same place stays on its way until the later one ends', () => {
    const marks = new CompletionMarks();
    const first = marks.ask('a#1:0:1');
    const again = marks.ask('a#1:0:1'); // VS Code asked again before the first answer came
    first();
    assert.equal(marks.settled('a#1:0:1'), true);
    again();
    assert.equal(marks.settled('a#1:0:1'), false);
  });
});
