// While the server is still listing the sessions (a fresh server over a big root), its answer to
// a completion is one "Listing dsh sessions…" row: ask again shortly, so the sessions replace it
// without another key pressed and without the popup closing in between.

import * as vscode from 'vscode';
import type { CompletionItem, CompletionList } from 'vscode';

import { isListingOnly } from './protocol';
import { StartupCompletions } from './startupCompletion';

/** How soon a completion answered "Listing dsh sessions…" is asked again. */
const LISTING_RETRY_MS = 250;
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
   * A completion at `position` is asked of the server; the function returned is called when it
   * ended. The first is logged with its time: when the `@` comes after the server is ready, the
   * start's figure is the time until the `@`, not the server's.
   */
  asking(document: vscode.TextDocument, position: vscode.Position): () => void {
    if (!this.asked) {
      this.asked = true;
      this.output.info(`first completion asked of the server ${this.sinceLoaded()} ms after activation`);
    }
    return this.completions.asking(document, position);
  }

  /** The server answered the completion at `position` with `result`. */
  answered(
    document: vscode.TextDocument,
    position: vscode.Position,
    result: CompletionItem[] | CompletionList | null | undefined,
  ): void {
    const items = Array.isArray(result) ? result : result?.items;
    if (items !== undefined && items.length > 0) {
      this.completions.answered(document, position);
    }
    if (!isListingOnly(result)) {
      this.retries = 0;
      if (this.activatedAt !== undefined && items !== undefined && items.length > 0) {
        // What a user waits for after opening a window (docs/benchmarks.md quotes it).
        this.output.info(`first completion with sessions: ${Date.now() - this.activatedAt} ms after activation`);
        this.activatedAt = undefined;
      }
    } else if (this.retries < MAX_LISTING_RETRIES) {
      this.retries += 1;
      this.askAgainSoon(document, position);
    }
  }

  /**
   * Asks for the completion at `position` again in a little while, if the user is still there
   * (same document version, same cursor), keeping the popup open: the server answered before it
   * had listed the sessions.
   */
  private askAgainSoon(document: vscode.TextDocument, position: vscode.Position): void {
    const version = document.version;
    setTimeout(() => {
      const editor = vscode.window.activeTextEditor;
      if (editor?.document === document && document.version === version && editor.selection.active.isEqual(position)) {
        this.output.trace('completion: asking again (the sessions are still being listed)');
        this.completions.askAgain();
      }
    }, LISTING_RETRY_MS);
  }
}
