// Everything a person reads in the status bar and the quick pick: sizes, counts and relative
// times in words, never raw JSON. Pure so the wording is unit tested.

import type { InterpreterChoice } from './interpreter';
import type { Candidate, DocumentSummary, Target } from './protocol';

/** ``numerator / denominator`` rounded half to even, as Python's format rounds an exact tie. */
function roundHalfEven(numerator: number, denominator: number): number {
  const quotient = Math.floor(numerator / denominator);
  const twice = 2 * (numerator - quotient * denominator);
  if (twice > denominator || (twice === denominator && quotient % 2 === 1)) {
    return quotient + 1;
  }
  return quotient;
}

/**
 * A size as the server writes it on the code lens and the inlay hints (transcript.kilobytes, then
 * " KB"): KB of 1,024 bytes, one decimal below 100 unless whole ("0.5 KB", "61.1 KB", "64 KB",
 * "2048 KB"), so the status bar and the code lens above the prompt always read the same figure.
 */
export function formatBytes(bytes: number): string {
  if (bytes % 1024 === 0 || bytes >= 100 * 1024) {
    return `${roundHalfEven(bytes, 1024).toLocaleString('en-US')} KB`;
  }
  const tenths = roundHalfEven(bytes * 10, 1024);
  return `${Math.floor(tenths / 10)}.${tenths % 10} KB`;
}

export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${count} ${count === 1 ? singular : pluralForm}`;
}

// The same units and wording as the server's completion rows (display.py), so a session
// reads the same age in the completion list and in the target picker.
const UNITS: readonly [number, string][] = [
  [365 * 86_400_000, 'year'],
  [30 * 86_400_000, 'month'],
  [7 * 86_400_000, 'week'],
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
];

/** "just now", "5 minutes ago", "3 weeks ago", "1 year ago". */
export function relativeTime(then: Date, now: Date): string {
  const elapsed = now.getTime() - then.getTime();
  if (Number.isNaN(elapsed)) {
    return '';
  }
  if (elapsed < 0) {
    return 'in the future';
  }
  for (const [size, name] of UNITS) {
    if (elapsed >= size) {
      return `${plural(Math.floor(elapsed / size), name)} ago`;
    }
  }
  return 'just now';
}

/** Accepts what a session record may carry: epoch milliseconds or an ISO timestamp. */
export function parseCreatedAt(value: unknown): Date | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) {
    return new Date(value);
  }
  if (typeof value === 'string' && value !== '') {
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? undefined : date;
  }
  return undefined;
}

/** Long ids and titles are recognisable by their start; keep the status bar short. */
export function shortId(sessionId: string, max = 14): string {
  return sessionId.length <= max ? sessionId : `${sessionId.slice(0, max - 1)}…`;
}

export interface StatusText {
  readonly text: string;
  readonly tooltip: string;
}

/** The target as the status bar knows it; `found: false` when the server could not list it. */
export interface StatusTarget {
  readonly id: string;
  readonly label?: string;
  readonly found?: boolean;
}

/**
 * The target the status bar shows: the server's when it says (it also reads $DSH_SESSION_ID and
 * knows the current title), else the one stored beside the setting (older servers, or no reply).
 */
export function statusTarget(fromServer: Target | null | undefined, stored: StatusTarget | undefined): StatusTarget | undefined {
  if (fromServer === undefined) {
    return stored;
  }
  return fromServer === null ? undefined : { id: fromServer.sessionId, label: fromServer.label, found: fromServer.found };
}

export function formatStatus(target: StatusTarget | undefined, summary: DocumentSummary | undefined): StatusText {
  const hasLabel = target?.label !== undefined && target.label !== target.id;
  const targetText = target === undefined ? 'no target' : hasLabel ? shortId(target.label ?? '', 28) : shortId(target.id);
  const missing = target?.found === false;
  const parts = [`$(references) ${missing ? '$(warning) ' : ''}${targetText}`];
  const tooltip: string[] = [
    target === undefined
      ? 'Target session: none set (the server uses $DSH_SESSION_ID when present)'
      : `Target session: ${hasLabel ? `${target.label} (${target.id})` : target.id}` +
        (missing ? ' — not found in the sessions folder; check the id and the sessionsRoot setting' : ''),
  ];
  if (summary !== undefined) {
    if (summary.mentions === 0) {
      parts.push('no mentions');
      tooltip.push('This document mentions no sessions.');
    } else if (summary.bytes === null || summary.tokens === null) {
      parts.push(plural(summary.mentions, 'mention'));
      tooltip.push(`${plural(summary.mentions, 'mention')}; the context size is known once the problems are fixed.`);
    } else {
      parts.push(`${plural(summary.mentions, 'mention')} · ${formatBytes(summary.bytes)}`);
      tooltip.push(
        `${plural(summary.mentions, 'mention')} of ${plural(summary.sessions, 'session')}: the message and its ` +
          `context weigh about ${formatBytes(summary.bytes)} (${formatTokens(summary.tokens, summary.tokensExact === true)}).`,
      );
    }
    if (summary.errors > 0) {
      parts.push(`$(error) ${summary.errors}`);
      tooltip.push(`${plural(summary.errors, 'problem')} to fix before the prompt can be sent.`);
    }
  }
  tooltip.push('Click to preview the referenced-session context.');
  return { text: parts.join('  '), tooltip: tooltip.join('\n') };
}

export interface CandidatePickText {
  readonly label: string;
  readonly description: string;
  readonly detail: string;
}

/**
 * A session's row in the pickers: its title, then its age and project as the `@` completion rows
 * read (`3 days ago · terraform`: the folder's name, not its path), and its id below when the
 * title is not the id.
 */
export function formatCandidate(candidate: Candidate, now: Date): CandidatePickText {
  const created = parseCreatedAt(candidate.createdAt);
  const when = created === undefined ? '' : relativeTime(created, now);
  const description = [when, candidate.project ?? ''].filter((part) => part !== '').join(' · ');
  // An untitled session's label is its id already: do not print it twice.
  return { label: candidate.label, description, detail: candidate.label === candidate.sessionId ? '' : candidate.sessionId };
}

/** The heading over Go to session's last row: says when no session matched, so an empty list reads as an answer. */
export function otherSymbolsHeading(found: number, query: string): string {
  return found === 0 && query !== '' ? `No session matches “${query}”` : 'Other symbols';
}

/** "04:01:09": the local wall-clock time, to the second. */
export function clockTime(when: Date): string {
  return [when.getHours(), when.getMinutes(), when.getSeconds()].map((part) => part.toString().padStart(2, '0')).join(':');
}

/**
 * The first lines of an open preview that no longer follows its prompt (the server stopped, or
 * preparing it again failed), so no one takes an old context for what dsh would send now.
 */
export function staleNotice(reason: string, preparedAt: Date): string {
  return (
    `OUT OF DATE: ${reason}.\n` +
    `Prepared at ${clockTime(preparedAt)}; it refreshes by itself once it can.\n\n`
  );
}

/**
 * The first lines of a preview whose prompt is no longer open: it was prepared from the file as
 * saved (`onDisk`), or the prompt is gone (deleted, renamed, or an untitled one closed), so the
 * text below is the last it had, and says so.
 */
export function promptGoneNotice(name: string, onDisk: boolean, preparedAt: Date): string {
  if (onDisk) {
    return (
      `PROMPT CLOSED: ${name} is not open; this is the context of the file as saved on disk.\n` +
      `Prepared at ${clockTime(preparedAt)}; it follows the prompt again once the prompt is open.\n\n`
    );
  }
  return (
    `PROMPT GONE: ${name} was deleted, renamed or closed unsaved; this preview no longer follows it.\n` +
    `This is the context as prepared at ${clockTime(preparedAt)}, for the text the prompt had then.\n\n`
  );
}

/** The tooltip's last line: which Python runs the server, and why that one. */
export function interpreterLine(choice: InterpreterChoice, version: string): string {
  return `Server: Python ${version}, ${choice.executable}, from ${choice.origin}.`;
}

/**
 * `3,086 tokens` when DeepSeek's tokenizer counted them, `~3,086 tokens, estimated` otherwise: the
 * server's `display.token_count`, which the code lens, hovers and the preview write (a test compares them).
 */
export function formatTokens(tokens: number, exact: boolean): string {
  const shown = tokens.toLocaleString('en-US');
  return exact ? `${shown} tokens` : `~${shown} tokens, estimated`;
}

// VS Code soft-wraps a line at any space, `/`, `.` or `,` (its `wordWrapBreakAfterCharacters`),
// injected text such as an inlay hint included, and counts the characters a collapsed mention
// hides: a hint after a mention was cut in two (`30.6 /`, then `64 KB` on the next row). These
// look the same and are no break opportunity, so a hint that does not fit moves whole to the next row.
const UNBREAKABLE: Readonly<Record<string, string>> = { ' ': '\u00a0', '/': '\u2215', '.': '\u2024', ',': '\u201a' };

/** An inlay hint's text with every soft-wrap opportunity replaced by a look-alike that is none. */
export function unbreakable(text: string): string {
  return text.replace(/[ /.,]/g, (character) => UNBREAKABLE[character] ?? character);
}

/** An error's message for a person (an Error's message, anything else as text). */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
