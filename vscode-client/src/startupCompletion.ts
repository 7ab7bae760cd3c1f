// The `@` popup before the server can answer, and asking VS Code again without closing it.
//
// The language client registers its completion provider only once the server has answered
// `initialize` (2-3 s after the window opens over a big store): an `@` typed before then found no
// provider, and the popup stayed shut. This provider is registered as the code loads and answers such
// an `@` with one "Starting dsh…" row, marked incomplete, until the client has started (its own
// provider registered); then this one says nothing, so no row is ever doubled.
//
// VS Code asks its providers again, keeping the popup open with the rows it shows until the new
// answer arrives, whenever a completion provider is registered or unregistered while a popup is
// active (SuggestModel's `_updateActiveSuggestSession`: `trigger({ retrigger: true })`). That is how
// the client's own registration replaces "Starting dsh…", and how `askAgain` replaces the server's
// "Listing dsh sessions…" row with the sessions: it registers or unregisters a provider that
// matches no document. `editor.action.triggerSuggest` instead closes an open popup and opens a new
// one (a retrigger without `retrigger`), the flicker this replaces.

import * as vscode from 'vscode';

import { atToken, STARTING_DETAIL, STARTING_LABEL } from './atToken';
import { CompletionMarks } from './completionMarks';
import type { ServerController } from './serverController';

/** A scheme no document has: the nudging provider is never asked. */
const NUDGE_SELECTOR: vscode.DocumentSelector = { scheme: 'dsh-session-reference-nudge' };
const NO_ANSWER: vscode.CompletionItemProvider = { provideCompletionItems: () => undefined };
/** How long after a start the editor may not yet know the completion provider (see `reopenCompletion`). */
const STARTUP_RETRIGGER_MS = 2000;
/** How long after a keystroke in that time `reopenCompletion` looks whether its completion got rows. */
const REOPEN_CHECK_MS = 300;

export class StartupCompletions implements vscode.CompletionItemProvider, vscode.Disposable {
  private registration: vscode.Disposable | undefined;
  private registeredFor: string | undefined;
  private nudge: vscode.Disposable | undefined;
  /** Where a completion was answered with rows or is being asked of the server, see `settledAt`. */
  private readonly marks = new CompletionMarks();

  constructor(
    private readonly selects: (document: vscode.TextDocument) => boolean,
    private readonly serverRunning: () => boolean,
  ) {}

  /**
   * Registers for `selector` (the documentSelector setting), with `@` as trigger character; again
   * only when it changed (each registration makes VS Code ask an open popup's providers again).
   */
  register(selector: vscode.DocumentSelector): void {
    const key = JSON.stringify(selector);
    if (this.registration === undefined || key !== this.registeredFor) {
      this.registration?.dispose();
      this.registration = vscode.languages.registerCompletionItemProvider(selector, this, '@');
      this.registeredFor = key;
    }
  }

  provideCompletionItems(document: vscode.TextDocument, position: vscode.Position): vscode.CompletionList | undefined {
    if (this.serverRunning() || !this.selects(document)) {
      return undefined;
    }
    const list = waitingRow(document, position, STARTING_LABEL);
    if (list !== undefined) {
      this.answered(document, position);
    }
    return list;
  }

  /** Notes that a completion at `position` got rows (the middleware calls it for the server's). */
  answered(document: vscode.TextDocument, position: vscode.Position): void {
    this.marks.answer(answerKey(document, position));
  }

  /** Notes that a completion at `position` is asked of the server; call the function returned when it ended. */
  asking(document: vscode.TextDocument, position: vscode.Position): () => void {
    return this.marks.ask(answerKey(document, position));
  }

  /**
   * Whether the completion at `position` of `document` as it is now got rows, or is being asked of
   * the server: asking VS Code for the popup again would only close it or repeat the question.
   */
  settledAt(document: vscode.TextDocument, position: vscode.Position): boolean {
    return this.marks.settled(answerKey(document, position));
  }

  /** Has VS Code ask every provider again, keeping an open popup open (see the file comment). */
  askAgain(): void {
    if (this.nudge === undefined) {
      this.nudge = vscode.languages.registerCompletionItemProvider(NUDGE_SELECTOR, NO_ANSWER);
    } else {
      this.nudge.dispose();
      this.nudge = undefined;
    }
  }

  dispose(): void {
    this.registration?.dispose();
    this.nudge?.dispose();
  }
}

/**
 * One row saying the sessions are coming (`label`: "Starting dsh…", "Listing dsh sessions…"), marked
 * incomplete, for the `@` token before `position`; undefined where there is none. It inserts
 * nothing: accepted, it puts back what was typed. Its filter text is what was typed, so VS Code
 * keeps it whatever follows the `@`.
 */
export function waitingRow(document: vscode.TextDocument, position: vscode.Position, label: string): vscode.CompletionList | undefined {
  const token = atToken(document.lineAt(position.line).text.slice(0, position.character));
  if (token === undefined) {
    return undefined;
  }
  const item = new vscode.CompletionItem(label, vscode.CompletionItemKind.Text);
  item.detail = STARTING_DETAIL;
  item.range = new vscode.Range(position.line, token.start, position.line, position.character);
  item.insertText = token.typed;
  item.filterText = token.typed;
  item.sortText = '0';
  return new vscode.CompletionList([item], true);
}

/** A completion's place: the document as it is now, and the position. */
export function answerKey(document: vscode.TextDocument, position: vscode.Position): string {
  return `${document.uri.toString()}#${document.version}:${position.line}:${position.character}`;
}

/**
 * An `@` typed while the server was starting found no one to ask, and VS Code would not ask again
 * by itself: once the client has started, ask if the cursor sits on an `@` token. The editor learns
 * of the new completion provider a moment later still (its registration crosses from the extension
 * host; a clean-clone run typed `@` in that moment and got no popup), so for STARTUP_RETRIGGER_MS
 * after each start a cursor that comes to sit on an `@` token asks again too. The same holds for
 * the extension's own provider, registered as its code loads, and for `activate`: in a window that
 * is itself starting, the extension host may learn of the editor only then (an `@` typed 0.2 s
 * after the code loaded got no popup until the server had started, 3 s later, when the only
 * starts counted were the load's and the server's).
 */
export class CompletionReopener implements vscode.Disposable {
  private startedAt = 0;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly controller: ServerController) {
    this.disposables = [
      controller.onDidStart(() => this.started()),
      vscode.window.onDidChangeTextEditorSelection((event) => {
        if (Date.now() - this.startedAt < STARTUP_RETRIGGER_MS && event.textEditor === vscode.window.activeTextEditor) {
          this.later(); // after the completion that this keystroke asks for has had time to answer
        }
      }),
    ];
    this.started();
  }

  /**
   * A start (the code's load, `activate`, the client's): ask at once, since a provider registered
   * before it reaches the editor before this command does (both cross in order), and again a
   * moment later if that completion ended without rows; for a while keystrokes ask again too.
   */
  started(): void {
    this.startedAt = Date.now();
    reopenCompletion(this.controller);
    this.later();
  }

  dispose(): void {
    for (const timer of this.timers) {
      clearTimeout(timer);
    }
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }

  private later(): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      reopenCompletion(this.controller);
    }, REOPEN_CHECK_MS);
    this.timers.add(timer);
  }
}

/** Opens the completion popup if the cursor sits on an `@` token whose completion got no rows. */
export function reopenCompletion(controller: ServerController): void {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || !controller.selects(editor.document) || !editor.selection.isEmpty) {
    return;
  }
  const position = editor.selection.active;
  const before = editor.document.lineAt(position.line).text.slice(0, position.character);
  // The extension answers an `@` itself while the server starts (StartupCompletions): what is
  // left is one typed before it was active, or in that moment. One whose completion got rows has
  // its popup open, which VS Code asks again by itself when a provider registers (triggerSuggest
  // would close and reopen it), as does one on its way to the server.
  if (atToken(before) !== undefined && !controller.completions.settledAt(editor.document, position)) {
    void vscode.commands.executeCommand('editor.action.triggerSuggest');
  }
}
