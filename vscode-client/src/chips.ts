// Which mentions read as chips (`@Title` and its cost, the `(dsh-session:…)` part out of sight),
// and which characters of each are hidden. The server judges the mentions: it links each mention
// of a session the sessions root lists (over the whole mention), flags each mention dsh would
// refuse with an error diagnostic, and each whose label would make a chip read as other than the
// session it sends (a label that is not the session's title, a bidi override, a zero-width space)
// with a warning. Nothing here parses a mention again: it only finds the `[` and
// the `](dsh-session:` inside a span the server linked, and gives up on any span that does not
// look like one. Offsets are the document's (UTF-16 code units); pure, so it is unit tested.

/** A stretch of the document by offsets, `end` exclusive. */
export interface Span {
  readonly start: number;
  readonly end: number;
}

export interface Chip {
  /** The whole mention, `@[label](dsh-session:…)`. */
  readonly mention: Span;
  /** The `@`, shown as the chip's start. */
  readonly at: Span;
  /** The label, shown as the rest of the chip. */
  readonly label: Span;
  /** Out of sight: the `[` after the `@`, and `](dsh-session:…)`. */
  readonly hidden: readonly [Span, Span];
}

const URI_OPEN = '](dsh-session:';
const PAYLOAD = /^[A-Za-z0-9_-]+$/;
const LINE_BREAK = /[\r\n\u2028\u2029]/;

/**
 * The chip of a mention the server linked, given its text and where it starts; undefined when the
 * text is not a labelled mention on one line (a bare URI, an empty label, a span the document no
 * longer holds): such a mention stays as it is written.
 */
export function chipOf(text: string, start: number): Chip | undefined {
  if (!text.startsWith('@[') || !text.endsWith(')')) {
    return undefined;
  }
  // The URI has no `]`, so the last `](dsh-session:` ends the label, whatever the label holds.
  const separator = text.lastIndexOf(URI_OPEN);
  if (separator <= 2 || !PAYLOAD.test(text.slice(separator + URI_OPEN.length, -1)) || LINE_BREAK.test(text)) {
    return undefined;
  }
  const end = start + text.length;
  return {
    mention: { start, end },
    at: { start, end: start + 1 },
    label: { start: start + 2, end: start + separator },
    hidden: [
      { start: start + 1, end: start + 2 },
      { start: start + separator, end },
    ],
  };
}

/**
 * Whether a diagnostic of this severity (VS Code's numbering: 0 error, 1 warning, 2 information,
 * 3 hint) keeps the mentions it touches written out. A warning does: the server warns where a
 * chip would read as another session than the one sent (its label is not that session's title)
 * or would hide part of its label; only the text as written shows what is sent.
 */
export function flagged(severity: number): boolean {
  return severity <= 1;
}

/** Whether two spans meet, edges included (a cursor at either end of a mention touches it). */
export function touches(a: Span, b: Span): boolean {
  return a.start <= b.end && b.start <= a.end;
}

/**
 * The linked mentions no flagged diagnostic (an error or a warning, see {@link flagged}) touches,
 * in document order and each once. A flag that only touches a mention's edge still keeps it
 * written out: an invalid or misleading mention is never hidden, and neither is a sound one
 * whose neighbour is wrong.
 */
export function soundMentions(links: readonly Span[], flags: readonly Span[]): Span[] {
  const seen = new Set<string>();
  return [...links]
    .sort((a, b) => a.start - b.start || a.end - b.end)
    .filter((link) => {
      const key = `${link.start}:${link.end}`;
      if (seen.has(key) || flags.some((flag) => touches(link, flag))) {
        return false;
      }
      seen.add(key);
      return true;
    });
}

/** One edit as VS Code reports it: the replaced stretch, and the length of its new text. */
export interface Change {
  readonly offset: number;
  readonly length: number;
  readonly inserted: number;
}

function shift(span: Span, by: number): Span {
  return { start: span.start + by, end: span.end + by };
}

/**
 * The chips after `changes`, applied one after the other as VS Code applies them, without asking
 * the server: a chip after an edit moves with its text, one an edit touches inside is dropped
 * (shown as written until the server has judged the new text).
 */
export function shiftChips(chips: readonly Chip[], changes: readonly Change[]): Chip[] {
  let current = [...chips];
  for (const change of changes) {
    const changeEnd = change.offset + change.length;
    const by = change.inserted - change.length;
    current = current.flatMap((chip) => {
      if (change.offset >= chip.mention.end) {
        return [chip];
      }
      if (changeEnd <= chip.mention.start) {
        const [open, tail] = chip.hidden;
        return [
          {
            mention: shift(chip.mention, by),
            at: shift(chip.at, by),
            label: shift(chip.label, by),
            hidden: [shift(open, by), shift(tail, by)],
          },
        ];
      }
      return [];
    });
  }
  return current;
}

/** The chips to draw collapsed: those no selection (or cursor) touches; a touched one reads as written. */
export function collapsed(chips: readonly Chip[], selections: readonly Span[]): Chip[] {
  return chips.filter((chip) => !selections.some((selection) => touches(chip.mention, selection)));
}

/**
 * Where each `dsh-session:` link target of a Markdown link (`[label](dsh-session:…)`) starts,
 * for the targets inside no span the server linked: the broken and unknown mentions, which VS
 * Code's Markdown support would otherwise make links to nothing (see mentionLinks.ts).
 */
export function unlinkedTargets(text: string, linked: readonly Span[]): number[] {
  // One sweep: targets come in order, so the spans, sorted by start, are passed once with the
  // furthest end seen so far (a span test per target was 10,000 targets times 10,000 links).
  const spans = [...linked].sort((a, b) => a.start - b.start);
  const starts: number[] = [];
  let next = 0;
  let reach = -Infinity;
  for (let found = text.indexOf(URI_OPEN); found >= 0; found = text.indexOf(URI_OPEN, found + 1)) {
    const target = found + 2; // after `](`
    while (next < spans.length && spans[next].start <= target) {
      reach = Math.max(reach, spans[next].end);
      next += 1;
    }
    if (!(target < reach)) {
      starts.push(target);
    }
  }
  return starts;
}

/**
 * The column at which VS Code soft-wraps a document's lines, as far as an extension can know it:
 * `Infinity` when lines never wrap (`editor.wordWrap` off), the set column for `wordWrapColumn`
 * (counted in columns, so only with the `simple` wrapping strategy), and undefined when the
 * wrap follows the editor's width (`on`, `bounded`): the extension API does not give an editor's
 * width, and no decoration changes where a line breaks.
 */
export function wrapColumn(wordWrap: string, column: number, strategy: string): number | undefined {
  if (wordWrap === 'off') {
    return Infinity;
  }
  return wordWrap === 'wordWrapColumn' && strategy !== 'advanced' && Number.isFinite(column) && column >= 1 ? column : undefined;
}

/** Columns a line's text takes in VS Code's own count: a tab to the next stop, a wide character two. */
export function columns(text: string, tabSize: number): number {
  let width = 0;
  for (const character of text) {
    if (character === '\t') {
      width += tabSize - (width % tabSize);
    } else {
      const code = character.codePointAt(0) ?? 0;
      width += code > 0xffff || wide(code) ? 2 : 1;
    }
  }
  return width;
}

/** VS Code's full-width ranges (`strings.isFullWidthCharacter`). */
function wide(code: number): boolean {
  return (code >= 0x2e80 && code <= 0xd7af) || (code >= 0xf900 && code <= 0xfaff) || (code >= 0xff01 && code <= 0xff5e);
}

/**
 * Whether a line is laid out on one row: its text and the hints drawn in it (`hintColumns`) fit
 * in `column` (see {@link wrapColumn}; undefined, unknown, never fits). A chip is drawn only on
 * such a line: VS Code wraps a line by all its text, hidden or not, so on a wrapped line the
 * hidden URI would leave blank rows and short rows between the chip and what follows it.
 */
export function oneRow(text: string, tabSize: number, hintColumns: number, column: number | undefined): boolean {
  return column === Infinity || (column !== undefined && columns(text, tabSize) + hintColumns <= column);
}
