// The words people read: status bar text, sizes, relative times and quick-pick rows.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  clockTime,
  formatBytes,
  interpreterLine,
  formatCandidate,
  formatStatus,
  otherSymbolsHeading,
  parseCreatedAt,
  relativeTime,
  shortId,
  promptGoneNotice,
  staleNotice,
  statusTarget,
  unbreakable,
} from '../src/format';
import { asDocumentSummary } from '../src/protocol';

const NOW = new Date('2026-03-10T12:00:00Z');

describe('formatBytes', () => {
  // tests/editors/vscode/test_vscode.py compares every size below 1 MiB with the server's own.
  test('writes sizes as the server\'s code lens and hints do: KB of 1,024 bytes', () => {
    const table: [number, string][] = [
      [0, '0 KB'],
      [512, '0.5 KB'],
      [1024, '1 KB'],
      [1280, '1.2 KB'], // an exact tie rounds to even, as Python's format does
      [1331, '1.3 KB'],
      [5939, '5.8 KB'],
      [62589, '61.1 KB'],
      [65536, '64 KB'],
      [102912, '100 KB'],
      [1048575, '1,024 KB'],
      [2097152, '2,048 KB'],
      [2_500_000, '2,441 KB'],
    ];
    for (const [bytes, text] of table) {
      assert.equal(formatBytes(bytes), text, `${bytes} bytes`);
    }
  });
});

describe('relativeTime', () => {
  const ago = (ms: number): string => relativeTime(new Date(NOW.getTime() - ms), NOW);
  test('reads like a person would say it, in the server\'s units', () => {
    assert.equal(ago(5_000), 'just now');
    assert.equal(ago(-60_000), 'in the future');
    assert.equal(ago(60_000), '1 minute ago');
    assert.equal(ago(59 * 60_000), '59 minutes ago');
    assert.equal(ago(2 * 3_600_000), '2 hours ago');
    assert.equal(ago(30 * 3_600_000), '1 day ago');
    assert.equal(ago(3 * 86_400_000), '3 days ago');
    assert.equal(ago(15 * 86_400_000), '2 weeks ago');
    assert.equal(ago(45 * 86_400_000), '1 month ago');
    assert.equal(ago(400 * 86_400_000), '1 year ago');
    assert.equal(ago(800 * 86_400_000), '2 years ago');
  });

  test('createdAt may be epoch milliseconds or an ISO string; junk is no date', () => {
    assert.equal(parseCreatedAt(NOW.getTime())?.toISOString(), NOW.toISOString());
    assert.equal(parseCreatedAt('2026-03-10T12:00:00.000Z')?.getTime(), NOW.getTime());
    assert.equal(parseCreatedAt('yesterday-ish'), undefined);
    assert.equal(parseCreatedAt(null), undefined);
    assert.equal(parseCreatedAt(''), undefined);
  });
});

describe('formatStatus', () => {
  const summary = { mentions: 2, sessions: 2, errors: 0, bytes: 12_345, tokens: 3_086 };

  test('no target and no summary yet', () => {
    const status = formatStatus(undefined, undefined);
    assert.equal(status.text, '$(references) no target');
    assert.match(status.tooltip, /DSH_SESSION_ID/);
  });

  test('target label, mention count and estimated size', () => {
    const status = formatStatus({ id: 'sess-1', label: 'Fix the parser' }, summary);
    assert.equal(status.text, '$(references) Fix the parser  2 mentions · 12.1 KB');
    assert.match(status.tooltip, /2 mentions of 2 sessions: the message and its context weigh about 12.1 KB \(~3,086 tokens, estimated\)/);
    const exact = formatStatus({ id: '0123456789abcdef0123' }, { ...summary, tokensExact: true });
    assert.match(exact.tooltip, /weigh about 12.1 KB \(3,086 tokens\)/);
  });

  test('singular forms and long ids shortened', () => {
    const status = formatStatus({ id: '0123456789abcdef0123' }, { mentions: 1, sessions: 1, errors: 0, bytes: 800, tokens: 200 });
    assert.equal(status.text, '$(references) 0123456789abc…  1 mention · 0.8 KB');
  });

  test('with errors there is no size (dsh would not send the prompt), and the errors are flagged', () => {
    const status = formatStatus({ id: '0123456789abcdef0123' }, { mentions: 1, sessions: 0, errors: 1, bytes: null, tokens: null });
    assert.equal(status.text, '$(references) 0123456789abc…  1 mention  $(error) 1');
    assert.match(status.tooltip, /1 problem to fix/);
    assert.match(status.tooltip, /Target session: 0123456789abcdef0123/);
  });

  test('a prompt without mentions says so', () => {
    assert.equal(formatStatus(undefined, { ...summary, mentions: 0, sessions: 0, bytes: 0, tokens: 0 }).text, '$(references) no target  no mentions');
  });

  test('a label that is just the id, or a long title, is shortened', () => {
    assert.equal(formatStatus({ id: '0123456789abcdef0123', label: '0123456789abcdef0123' }, undefined).text, '$(references) 0123456789abc…');
    const long = formatStatus({ id: 's', label: 'Stale price flash on checkout after coupon removal' }, undefined);
    assert.equal(long.text, '$(references) Stale price flash on checko…');
    assert.match(long.tooltip, /Stale price flash on checkout after coupon removal \(s\)/);
  });

  test('the target the server names, with its title, is what the status bar and its tooltip show', () => {
    const reply = asDocumentSummary({ ...summary, target: { sessionId: 'sess-7', label: 'Port v1 client to v2', found: true } });
    const status = formatStatus(statusTarget(reply.target, { id: 'stale-setting', label: 'Old title' }), reply);
    assert.equal(status.text, '$(references) Port v1 client to v2  2 mentions · 12.1 KB');
    assert.match(status.tooltip, /^Target session: Port v1 client to v2 \(sess-7\)$/m);
  });

  test('a null target from the server means none, even if a label is stored; no reply keeps the stored one', () => {
    const stored = { id: 'sess-1', label: 'Stored title' };
    assert.equal(formatStatus(statusTarget(null, stored), undefined).text, '$(references) no target');
    assert.equal(formatStatus(statusTarget(undefined, stored), undefined).text, '$(references) Stored title');
  });

  test('a target the sessions folder does not list is flagged, by id', () => {
    const reply = asDocumentSummary({ ...summary, target: { sessionId: 'sess-typo', label: 'sess-typo', found: false } });
    const status = formatStatus(statusTarget(reply.target, undefined), reply);
    assert.equal(status.text, '$(references) $(warning) sess-typo  2 mentions · 12.1 KB');
    assert.match(status.tooltip, /Target session: sess-typo — not found in the sessions folder/);
  });

  test('shortId keeps short ids whole', () => {
    assert.equal(shortId('abc'), 'abc');
    assert.equal(shortId('x'.repeat(20)).length, 14);
  });
});

describe('formatCandidate', () => {
  test('label, relative time and project (the folder, not its path); the id on the detail line', () => {
    const row = formatCandidate(
      {
        sessionId: 's-1',
        label: 'Refactor store',
        cwd: '/work/app',
        project: 'app',
        createdAt: NOW.getTime() - 7_200_000,
        mention: '@[Refactor store](dsh-session:InMtMSI)',
      },
      NOW,
    );
    assert.deepEqual(row, { label: 'Refactor store', description: '2 hours ago · app', detail: 's-1' });
  });

  test('no cwd and no date leave no stray separators', () => {
    const row = formatCandidate({ sessionId: 's-2', label: 's-2', cwd: null, project: null, createdAt: undefined, mention: '' }, NOW);
    assert.equal(row.description, '');
    assert.equal(row.detail, '', 'an untitled session shows its id once, as the label');
  });
});

describe('otherSymbolsHeading', () => {
  test('says when no session matched what was typed', () => {
    assert.equal(otherSymbolsHeading(0, 'terraform'), 'No session matches “terraform”');
    assert.equal(otherSymbolsHeading(3, 'terraform'), 'Other symbols');
    assert.equal(otherSymbolsHeading(0, ''), 'Other symbols', 'an empty root is not a failed search');
  });
});

describe('staleNotice', () => {
  const at = new Date(2026, 2, 10, 9, 5, 7);
  test('names the reason and the local time the text was prepared, above a blank line', () => {
    assert.equal(clockTime(at), '09:05:07');
    const notice = staleNotice('the DSH language server is not running', at);
    assert.equal(
      notice,
      'OUT OF DATE: the DSH language server is not running.\n' +
        'Prepared at 09:05:07; it refreshes by itself once it can.\n\n',
    );
  });
});

describe('promptGoneNotice', () => {
  const at = new Date(2026, 2, 10, 9, 5, 7);
  test('a closed prompt: prepared from the file on disk, and says so', () => {
    assert.equal(
      promptGoneNotice('prompt.md', true, at),
      'PROMPT CLOSED: prompt.md is not open; this is the context of the file as saved on disk.\n' +
        'Prepared at 09:05:07; it follows the prompt again once the prompt is open.\n\n',
    );
  });
  test('a prompt that is gone: the last text, said to follow nothing', () => {
    const notice = promptGoneNotice('prompt.md', false, at);
    assert.match(notice, /^PROMPT GONE: prompt\.md was deleted, renamed or closed unsaved; this preview no longer follows it\.\n/u);
    assert.match(notice, /as prepared at 09:05:07/u);
  });
});

describe('interpreterLine', () => {
  test('says which Python runs the server and why', () => {
    const choice = { executable: '/envs/a/bin/python', source: 'python-extension' as const, origin: "the Python extension's active environment (a)" };
    assert.equal(interpreterLine(choice, '3.12.4'), "Server: Python 3.12.4, /envs/a/bin/python, from the Python extension's active environment (a).");
  });
});

describe('unbreakable', () => {
  // VS Code's default wordWrapBreakAfterCharacters (its soft-wrap opportunities), as of 1.139.
  const BREAK_AFTER = ' \t})]?|/&.,;';

  test('a cost hint keeps its look but offers VS Code no place to wrap it', () => {
    const label = '12 msgs · 30.6 / 64 KB · truncated';
    const shown = unbreakable(label);
    assert.equal(shown, '12\u00a0msgs\u00a0·\u00a030\u20246\u00a0\u2215\u00a064\u00a0KB\u00a0·\u00a0truncated');
    assert.equal([...shown].some((character) => BREAK_AFTER.includes(character)), false);
    assert.equal(shown.length, label.length);
    assert.equal(unbreakable('1,234 tokens'), '1\u201a234\u00a0tokens');
    assert.equal(unbreakable('counted once'), 'counted\u00a0once');
  });
});
