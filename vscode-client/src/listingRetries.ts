// While the server is still listing the sessions (a fresh server over a big root), its answer to
// a completion is one "Listing dsh sessions…" row: ask again shortly, so the sessions replace it
// without another key pressed and without the popup closing in between. A server slow to answer
// at all (its start, or a cold listing, on cores the editor keeps busy) gets the same row from the
// extension meanwhile, and its answer replaces it the same way.

import * as vscode from 'vscode';
import type { CompletionItem, CompletionList } from 'vscode';

import { LISTING_LABEL, LISTING_TITLE } from './atToken';
import { isListingOnly } from './protocol';
import { answerKey, StartupCompletions, waitingRow } from './startupCompletion';
import { LATE, within } from './within';

/** How soon a completion answered "Listing dsh sessions…" is asked again. */
const LISTING_RETRY_MS = 250;
/**
 * How long a completion waits for the server before the extension shows its own "Listing dsh
 * sessions…" row: a server starting, or listing a cold root, on two cores the editor's own start
 * kept busy took 0.5-1 s to answer even its listing row (a warm answer takes 10-150 ms).
 */
const SLOW_ANSWER_MS = 300;
/** How long an answer held for VS Code's next ask waits for it (VS Code asks within milliseconds). */
const HELD_MS = 1000;
/**
 * How many times in a row it is asked again (about 30 s): a root that never finishes listing (a
 * stalled network mount) leaves the row up until the next key, rather than reopen the popup forever.
 */
const MAX_LISTING_RETRIES = 100;

export class ListingRetries {
  /** Completions answered only "Listing dsh sessions…" in a row (see MAX_LISTING_RETRIES). */
  private retries = 0;
  /** Until the first rows of sessions: when the extension's code began to run. */
  private activatedAt: number | undefined;
  /** Whether a completion has been asked of the server yet (see `asking`). */
  private asked = false;
  /**
   * The server's answer that came after the extension's listing row went out in its place (see
   * `answer`), for the place it was asked at: VS Code, asked again there, gets it without a second
   * request. Dropped when it is not taken at once (the user moved on, or no popup was left to ask).
   */
  private held: { place: string; result: CompletionItem[] | CompletionList } | undefined;
  /** A re-ask for a held answer is on its way (one for several answers that came together). */
  private reasking = false;

  constructor(
    private readonly completions: StartupCompletions,
    private readonly output: vscode.LogOutputChannel,
    /**
     * When the extension's code began to run (earlyStart.ts): VS Code activating the extension,
     * before `activate` is called, so that work moved ahead of `activate` is still counted.
     */
    readonly loadedAt: number,
  ) {
    this.activatedAt = loadedAt;
  }

  /** Milliseconds since the extension's code began to run. */
  sinceLoaded(): number {
    return Date.now() - this.loadedAt;
  }

  /**
   * The server's answer to the completion at `position` (`ask` asks it), or, if it has not come
   * within SLOW_ANSWER_MS, the extension's own "Listing dsh sessions…" row, marked incomplete, with
   * the listing's progress in the status bar until the answer comes: that answer then replaces the
   * row, the popup kept open, if the document and the cursor are still as they were asked. Never a
   * silent popup while the server works.
   */
  async answer(
    document: vscode.TextDocument,
    position: vscode.Position,
    token: vscode.CancellationToken,
    ask: () => vscode.ProviderResult<CompletionItem[] | CompletionList>,
  ): Promise<CompletionItem[] | CompletionList | null | undefined> {
    const place = answerKey(document, position);
    const held = this.held;
    this.held = undefined;
    this.reasking = false;
    if (held !== undefined && held.place === place) {
      this.answered(document, position, document.version, held.result);
      return held.result;
    }
    const version = document.version;
    const ended = this.asking(document, position);
    let shown = false;
    const asked = Promise.resolve()
      .then(ask)
      .then(
        (result) => {
          ended();
          this.answered(document, position, version, result, shown);
          return result;
        },
        (error: unknown) => {
          ended();
          throw error;
        },
      );
    const first = await within(asked, SLOW_ANSWER_MS);
    if (first !== LATE) {
      return first;
    }
    const row = token.isCancellationRequested ? undefined : waitingRow(document, position, LISTING_LABEL);
    if (row === undefined) {
      return asked;
    }
    shown = true;
    asked.catch(() => undefined); // a later failure is the client's to log; the row stays until the next key
    this.completions.answered(document, position);
    this.output.trace('completion: the server is slow to answer; showing the listing row meanwhile');
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: LISTING_TITLE }, () => asked.catch(() => undefined));
    return row;
  }

  /**
   * A completion at `position` is asked of the server; the function returned is called when it
   * ended. The first is logged with its time: when the `@` comes after the server is ready, the
   * start's figure is the time until the `@`, not the server's.
   */
  private asking(document: vscode.TextDocument, position: vscode.Position): () => void {
    if (!this.asked) {
      this.asked = true;
      this.output.info(`first completion asked of the server ${this.sinceLoaded()} ms after activation`);
    }
    return this.completions.asking(document, position);
  }

  /**
   * The server answered the completion asked at `position` of `document` at `version` with
   * `result`; with `rowShown` the popup shows the extension's row instead (see `answer`), which
   * this answer replaces if the document is still at that version.
   */
  private answered(
    document: vscode.TextDocument,
    position: vscode.Position,
    version: number,
    result: CompletionItem[] | CompletionList | null | undefined,
    rowShown = false,
  ): void {
    const items = Array.isArray(result) ? result : result?.items;
    const current = document.version === version;
    if (current && items !== undefined && items.length > 0) {
      this.completions.answered(document, position);
    }
    if (rowShown) {
      // The popup shows the extension's row: this answer replaces it once asked again (the
      // server's own listing row too, with how far it is), and is taken as it is handed over
      // then, as VS Code shows it. An answer to older text is no one's.
      if (current && result !== null && result !== undefined) {
        this.held = { place: answerKey(document, position), result };
        this.askAgainSoon(document, position, version, 0);
      }
      return;
    }
    if (isListingOnly(result)) {
      if (this.retries < MAX_LISTING_RETRIES) {
        this.retries += 1;
        this.askAgainSoon(document, position, version, LISTING_RETRY_MS);
      }
      return;
    }
    this.retries = 0;
    if (this.activatedAt !== undefined && items !== undefined && items.length > 0) {
      // What a user waits for after opening a window (docs/benchmarks.md quotes it).
      this.output.info(`first completion with sessions: ${Date.now() - this.activatedAt} ms after activation`);
      this.activatedAt = undefined;
    }
  }

  /**
   * Asks for the completion at `position` again after `ms`, if the user is still there (the
   * document at `version`, the same cursor), keeping the popup open: it shows a listing row. A held
   * answer not asked for then is dropped; several re-asks due at once ask once.
   */
  private askAgainSoon(document: vscode.TextDocument, position: vscode.Position, version: number, ms: number): void {
    setTimeout(() => {
      const editor = vscode.window.activeTextEditor;
      if (editor?.document === document && document.version === version && editor.selection.active.isEqual(position)) {
        this.askAgainOnce();
      } else {
        this.held = undefined;
      }
    }, ms);
  }

  /** Has VS Code ask again, unless an ask it was asked for has not come yet (see `answer`). */
  private askAgainOnce(): void {
    if (this.reasking) {
      return;
    }
    this.reasking = true;
    this.output.trace('completion: asking again (the popup shows a listing row)');
    this.completions.askAgain();
    const held = this.held;
    setTimeout(() => {
      // No ask came (the popup was closed meanwhile): the next ask is not this one's.
      this.reasking = false;
      if (this.held === held) {
        this.held = undefined;
      }
    }, HELD_MS);
  }
}
