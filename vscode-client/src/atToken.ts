// The `@` token a completion answers, as the server finds it for a fresh request (an `@` at the
// start of the line or after whitespace, then no whitespace, no `"` (a file search in dsh's TUI)
// and no `[` (a mention written by hand)). Pure, so the Node tests run it.

/** The row the extension shows for an `@` typed before the server can answer. */
export const STARTING_LABEL = 'Starting dsh…';
/** That row's detail: short, so the default-width popup shows it whole. */
export const STARTING_DETAIL = 'sessions follow';
/**
 * The row the extension shows while a running server is slow to answer an `@` (its start, or a cold
 * listing, shares busy cores with the editor): the server's own row says the same.
 */
export const LISTING_LABEL = 'Listing dsh sessions…';
/** The listing's progress in the status bar: the server's own says the same (lsp/progress.py). */
export const LISTING_TITLE = 'Listing dsh sessions';

export interface AtToken {
  /** Column of the `@`. */
  readonly start: number;
  /** The token as typed, `@` included: what the row's edit puts back. */
  readonly typed: string;
}

const AT_TOKEN = /(?:^|\s)(@[^\s"[]*)$/u;

/** The `@` token that ends `before` (a line's text up to the cursor), if any. */
export function atToken(before: string): AtToken | undefined {
  const match = AT_TOKEN.exec(before);
  if (match === null) {
    return undefined;
  }
  const typed = match[1];
  return { start: before.length - typed.length, typed };
}
