// Mentions read as chips: which spans the server judged sound, where their hidden parts are, and
// how they move with edits before the server has judged the new text.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  chipOf,
  collapsed,
  columns,
  flagged,
  oneRow,
  shiftChips,
  soundMentions,
  Span,
  unlinkedTargets,
  wrapColumn,
} from '../src/chips';

const MENTION = '@[Fix the zstd reader](dsh-session:IjAxOThjMmE3LTMzMzMtN2MzZC05ZjAwLTAwMDAwMDAwMDAwZCI)';

function span(text: string, part: string, from = 0): Span {
  const start = text.indexOf(part, from);
  assert.ok(start >= 0, part);
  return { start, end: start + part.length };
}

/** What the line reads with the hidden parts of `chips` taken out. */
function shown(text: string, hidden: Span[]): string {
  let out = '';
  let at = 0;
  for (const part of [...hidden].sort((a, b) => a.start - b.start)) {
    out += text.slice(at, part.start);
    at = part.end;
  }
  return out + text.slice(at);
}

describe('chipOf', () => {
  test('a labelled mention reads @Title: its [ and ](dsh-session:…) are hidden', () => {
    const line = `Compare with ${MENTION} before you start.`;
    const where = span(line, MENTION);
    const chip = chipOf(line.slice(where.start, where.end), where.start);
    assert.ok(chip);
    assert.deepEqual(chip.mention, where);
    assert.equal(line.slice(chip.at.start, chip.at.end), '@');
    assert.equal(line.slice(chip.label.start, chip.label.end), 'Fix the zstd reader');
    assert.equal(shown(line, [...chip.hidden]), 'Compare with @Fix the zstd reader before you start.');
  });

  test('a label holding brackets, parentheses and escapes keeps them; only the URI part goes', () => {
    const text = '@[a \\] b (c) [d](dsh-session:x) e](dsh-session:InMxIg)';
    const chip = chipOf(text, 10);
    assert.ok(chip);
    assert.equal(shown(' '.repeat(10) + text, [...chip.hidden]).trim(), '@a \\] b (c) [d](dsh-session:x) e');
  });

  test('anything else stays as written', () => {
    for (const text of [
      'dsh-session:InMxIg', // a bare URI has no label to show
      '@[](dsh-session:InMxIg)', // nor has an empty label
      '@[x](dsh-session:)',
      '@[x](dsh-session:In Mx)',
      '@[two\nlines](dsh-session:InMxIg)',
      '@[x](https://example.com)',
      '[x](dsh-session:InMxIg)',
      '@[x](dsh-session:InMxIg', // the document no longer holds what the server linked
    ]) {
      assert.equal(chipOf(text, 0), undefined, JSON.stringify(text));
    }
  });
});

describe('soundMentions', () => {
  test('a linked mention an error touches is never collapsed, nor one whose edge an error touches', () => {
    const links = [
      { start: 40, end: 60 },
      { start: 0, end: 20 },
      { start: 0, end: 20 },
      { start: 60, end: 80 },
    ];
    assert.deepEqual(soundMentions(links, []), [
      { start: 0, end: 20 },
      { start: 40, end: 60 },
      { start: 60, end: 80 },
    ]);
    // too-many-references covers the whole 4th mention; an error at the next one's start touches its neighbour
    assert.deepEqual(soundMentions(links, [{ start: 45, end: 50 }]), [
      { start: 0, end: 20 },
      { start: 60, end: 80 },
    ]);
    assert.deepEqual(soundMentions(links, [{ start: 80, end: 80 }]), [
      { start: 0, end: 20 },
      { start: 40, end: 60 },
    ]);
    assert.deepEqual(soundMentions(links, [{ start: 21, end: 39 }]).length, 3);
  });

  test('errors and warnings keep a mention written out, information and hints do not', () => {
    // A warning is what the server gives a label that is not the title of the session it sends:
    // `@[Harmless refactor](dsh-session:<the secrets session>)` must never read `@Harmless refactor`.
    const severities = [0, 1, 2, 3].filter(flagged);
    assert.deepEqual(severities, [0, 1]);
  });
});

describe('collapsed', () => {
  test('a mention a cursor or selection touches (at either edge) is shown as written', () => {
    const chip = chipOf(MENTION, 10);
    assert.ok(chip);
    const end = 10 + MENTION.length;
    assert.deepEqual(collapsed([chip], []), [chip]);
    assert.deepEqual(collapsed([chip], [{ start: 0, end: 0 }, { start: end + 1, end: end + 1 }]), [chip]);
    for (const cursor of [10, 20, end]) {
      assert.deepEqual(collapsed([chip], [{ start: cursor, end: cursor }]), [], String(cursor));
    }
    assert.deepEqual(collapsed([chip], [{ start: 0, end: 200 }]), []);
  });
});

describe('shiftChips', () => {
  const chip = chipOf(MENTION, 100);
  assert.ok(chip);
  const end = 100 + MENTION.length;

  test('an edit before a mention moves it; one after leaves it', () => {
    const [moved] = shiftChips([chip], [{ offset: 5, length: 2, inserted: 7 }]);
    assert.deepEqual(moved.mention, { start: 105, end: end + 5 });
    assert.deepEqual(moved.label, { start: chip.label.start + 5, end: chip.label.end + 5 });
    assert.deepEqual(moved.hidden, [
      { start: chip.hidden[0].start + 5, end: chip.hidden[0].end + 5 },
      { start: chip.hidden[1].start + 5, end: chip.hidden[1].end + 5 },
    ]);
    assert.deepEqual(shiftChips([chip], [{ offset: 100, length: 0, inserted: 3 }])[0].mention.start, 103); // typed before the @
    assert.deepEqual(shiftChips([chip], [{ offset: end, length: 0, inserted: 3 }]), [chip]); // typed after the )
  });

  test('an edit inside a mention drops it until the server judges the text again', () => {
    assert.deepEqual(shiftChips([chip], [{ offset: 110, length: 1, inserted: 0 }]), []);
    assert.deepEqual(shiftChips([chip], [{ offset: 90, length: 20, inserted: 0 }]), []);
    assert.deepEqual(shiftChips([chip], [{ offset: end - 1, length: 1, inserted: 0 }]), []);
  });

  test('changes apply one after the other, as VS Code applies them', () => {
    // Two cursors, the later one first: a deletion after the mention, then an insertion before it.
    const [moved] = shiftChips([chip], [
      { offset: end + 10, length: 4, inserted: 0 },
      { offset: 0, length: 0, inserted: 2 },
    ]);
    assert.deepEqual(moved.mention, { start: 102, end: end + 2 });
  });
});

test('unlinkedTargets: the link targets of mentions the server did not link, where each starts', () => {
  const good = '@[ok](dsh-session:ImEi)';
  const text = `${good} and @[x](dsh-session:IiJ) and [y](dsh-session:)`;
  const linked: Span[] = [{ start: 0, end: good.length }];
  const broken = text.indexOf('dsh-session:IiJ');
  const empty = text.lastIndexOf('dsh-session:');
  assert.deepEqual(unlinkedTargets(text, linked), [broken, empty]);
  assert.deepEqual(unlinkedTargets(text, []), [good.indexOf('dsh-session:'), broken, empty]);
  assert.deepEqual(unlinkedTargets('no mentions, dsh-session:abc bare', []), []);
});

test('unlinkedTargets: in any order and overlapping, a span hides exactly the targets inside it', () => {
  let seed = 7;
  const next = (below: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % below;
  };
  for (let round = 0; round < 300; round += 1) {
    const text = Array.from({ length: 1 + next(12) }, () => (next(3) === 0 ? 'text ' : '[a](dsh-session:x) ')).join('');
    const linked: Span[] = Array.from({ length: next(6) }, () => {
      const start = next(text.length + 2);
      return { start, end: start + next(40) };
    });
    const targets: number[] = [];
    for (let at = text.indexOf('](dsh-session:'); at >= 0; at = text.indexOf('](dsh-session:', at + 1)) {
      targets.push(at + 2);
    }
    const outside = targets.filter((target) => !linked.some((span) => span.start <= target && target < span.end));
    assert.deepEqual(unlinkedTargets(text, linked), outside, JSON.stringify({ text, linked }));
  }
});

describe('a chip only on a line laid out on one row', () => {
  const line = `Compare the checkout flow with ${MENTION} and tell me what changed.`;

  test('the wrap column an extension can know: none when lines never wrap, the set one, else unknown', () => {
    assert.equal(wrapColumn('off', 80, 'simple'), Infinity);
    assert.equal(wrapColumn('wordWrapColumn', 120, 'simple'), 120);
    // The editor's width is not in the API: viewport wrapping is unknown, so is `bounded`.
    assert.equal(wrapColumn('on', 80, 'simple'), undefined);
    assert.equal(wrapColumn('bounded', 200, 'simple'), undefined);
    // The advanced strategy measures pixels, which columns do not give for every font.
    assert.equal(wrapColumn('wordWrapColumn', 120, 'advanced'), undefined);
    assert.equal(wrapColumn('wordWrapColumn', Number.NaN, 'simple'), undefined);
  });

  test("columns are VS Code's: a tab to the next stop, a wide character or a surrogate pair two", () => {
    assert.equal(columns('abc', 4), 3);
    assert.equal(columns('a\tb', 4), 5);
    assert.equal(columns('\t\t', 2), 4);
    assert.equal(columns('日本', 4), 4);
    assert.equal(columns('a😀', 4), 3);
  });

  test('the line and its hints must fit the column; an unknown column never fits', () => {
    const width = line.length;
    assert.ok(oneRow(line, 4, 0, Infinity));
    assert.ok(oneRow(line, 4, 20, width + 20));
    assert.ok(!oneRow(line, 4, 21, width + 20)); // the hint pushes it onto a second row
    assert.ok(!oneRow(line, 4, 0, width - 1));
    assert.ok(!oneRow(line, 4, 0, undefined));
  });
});
