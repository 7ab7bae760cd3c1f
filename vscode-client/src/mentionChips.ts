// Mentions read as chips: in every editor of a prompt, a sound mention shows as `@Title` on a
// tinted background with its cost hint after it, its `[` and `](dsh-session:…)` out of sight.
// The text itself never changes, so copy, search, undo and the cursor's columns are the
// document's; a mention a cursor or selection touches is shown as written, so it is edited as
// text. Which mentions are sound is the server's word (see chips.ts): its transcript links and
// its error and warning diagnostics (a label that is not the title of the session it sends is a
// warning: such a mention is never drawn as a chip, so it cannot read as another session).
//
// VS Code gives extensions no way to take characters out of a line's layout: the characters are
// hidden by the decoration's CSS (`display: none`), and soft wrapping still counts them (its line
// breaks are computed from the text and injected text such as inlay hints, never from decorations;
// folding hides whole lines only). So a chip's cost hint is drawn right after its label, before
// the hidden URI (`hintAt`): a wrap then never puts a row of hidden text between chip and hint.

import * as vscode from 'vscode';

import { Change, Chip, chipOf, collapsed, flagged, shiftChips, soundMentions, Span } from './chips';
import { errorText } from './format';
import { transcriptLinkRanges } from './protocol';
import { ServerController } from './serverController';
import { SECTION } from './settings';

/** Quiet time after an edit or new diagnostics before the server is asked again. */
const REFRESH_MS = 250;
/** At most this many chips per document; a document with more shows the rest as written. */
const MAX_CHIPS = 2000;
/** The `source` of the server's diagnostics. */
const SOURCE = 'dsh-session-reference';
export const COLLAPSE_SETTING = 'collapseMentions';
/** The theme color `dshSessionReference.mentionChipBackground` (package.json), as CSS. */
const CHIP_BACKGROUND = 'var(--vscode-dshSessionReference-mentionChipBackground)';

interface Judged {
  /** The chips of the server's last judgement, moved with the edits made since. */
  chips: Chip[];
}

export class MentionChips implements vscode.Disposable {
  private readonly hidden = vscode.window.createTextEditorDecorationType({ textDecoration: 'none; display: none' });
  // The chip's tint is set on the characters' own spans (the CSS after `textDecoration`):
  // `backgroundColor` is drawn in a layer of its own, which VS Code leaves out on a line with
  // hidden characters.
  private readonly chipStart = vscode.window.createTextEditorDecorationType({
    textDecoration: `none; background-color: ${CHIP_BACKGROUND}; border-radius: 3px 0 0 3px`,
  });
  private readonly chipEnd = vscode.window.createTextEditorDecorationType({
    textDecoration: `none; background-color: ${CHIP_BACKGROUND}; border-radius: 0 3px 3px 0`,
  });
  private readonly judged = new Map<string, Judged>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly asking = new Map<string, vscode.CancellationTokenSource>();
  /** What each editor shows collapsed now, so a cursor move that changes nothing redraws nothing. */
  private readonly drawn = new WeakMap<vscode.TextEditor, string>();
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly controller: ServerController) {
    controller.placeHints = (document, position) => this.hintAt(document, position);
    this.disposables = [
      this.hidden,
      this.chipStart,
      this.chipEnd,
      vscode.window.onDidChangeVisibleTextEditors(() => this.refreshVisible()),
      vscode.window.onDidChangeTextEditorSelection((event) => this.draw(event.textEditor)),
      vscode.workspace.onDidChangeTextDocument((event) => this.edited(event)),
      vscode.workspace.onDidCloseTextDocument((document) => this.forget(document.uri.toString())),
      vscode.languages.onDidChangeDiagnostics((event) => {
        for (const uri of event.uris) {
          this.schedule(uri.toString());
        }
      }),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration(`${SECTION}.${COLLAPSE_SETTING}`) || event.affectsConfiguration(`${SECTION}.documentSelector`)) {
          this.refreshVisible();
        }
      }),
      controller.onDidChangeState((state) => {
        if (state === 'running') {
          this.refreshVisible();
        }
      }),
    ];
    this.refreshVisible();
  }

  private enabled(document: vscode.TextDocument): boolean {
    return vscode.workspace.getConfiguration(SECTION, document.uri).get<boolean>(COLLAPSE_SETTING, true) && this.controller.selects(document);
  }

  private refreshVisible(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      this.draw(editor);
      this.schedule(editor.document.uri.toString(), 0);
    }
  }

  /** Asks the server again for `uri` once edits and diagnostics have settled, if it is shown. */
  private schedule(uri: string, delay = REFRESH_MS): void {
    if (!vscode.window.visibleTextEditors.some((editor) => editor.document.uri.toString() === uri)) {
      return;
    }
    clearTimeout(this.timers.get(uri));
    this.timers.set(
      uri,
      setTimeout(() => {
        this.timers.delete(uri);
        void this.judge(uri);
      }, delay),
    );
  }

  private async judge(uri: string): Promise<void> {
    const document = vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri);
    if (document === undefined) {
      return;
    }
    if (!this.enabled(document)) {
      this.judged.delete(uri);
      this.drawAll(uri);
      return;
    }
    if (this.controller.state !== 'running') {
      return; // keep what is drawn; asked again once the server runs
    }
    this.asking.get(uri)?.cancel();
    const asking = new vscode.CancellationTokenSource();
    this.asking.set(uri, asking);
    const version = document.version;
    let links: unknown;
    try {
      links = await this.controller.documentLinks(document.uri, asking.token);
    } catch (error) {
      if (!asking.token.isCancellationRequested) {
        this.controller.output.warn(`mention chips: ${errorText(error)}`);
      }
      return;
    } finally {
      if (this.asking.get(uri) === asking) {
        this.asking.delete(uri);
      }
      asking.dispose();
    }
    if (asking.token.isCancellationRequested || document.isClosed || document.version !== version) {
      return; // an edit since: that edit scheduled its own request
    }
    const offsets = (range: { start: vscode.Position; end: vscode.Position }): Span => ({
      start: document.offsetAt(range.start),
      end: document.offsetAt(range.end),
    });
    const linked = transcriptLinkRanges(links).map((range) =>
      offsets({
        start: new vscode.Position(range.start.line, range.start.character),
        end: new vscode.Position(range.end.line, range.end.character),
      }),
    );
    const errors = vscode.languages
      .getDiagnostics(document.uri)
      .filter((diagnostic) => diagnostic.source === SOURCE && flagged(diagnostic.severity))
      .map((diagnostic) => offsets(diagnostic.range));
    const chips = soundMentions(linked, errors)
      .slice(0, MAX_CHIPS)
      .flatMap((span) => {
        const chip = chipOf(document.getText(new vscode.Range(document.positionAt(span.start), document.positionAt(span.end))), span.start);
        return chip === undefined ? [] : [chip];
      });
    this.judged.set(uri, { chips });
    this.drawAll(uri);
  }

  /** Chips move with an edit at once (no flicker while typing); the server judges the new text after. */
  private edited(event: vscode.TextDocumentChangeEvent): void {
    const uri = event.document.uri.toString();
    const judged = this.judged.get(uri);
    if (event.contentChanges.length === 0) {
      return;
    }
    if (judged !== undefined) {
      const changes: Change[] = event.contentChanges.map((change) => ({
        offset: change.rangeOffset,
        length: change.rangeLength,
        inserted: change.text.length,
      }));
      judged.chips = shiftChips(judged.chips, changes);
      this.drawAll(uri);
    }
    this.schedule(uri);
  }

  private drawAll(uri: string): void {
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() === uri) {
        this.draw(editor);
      }
    }
  }

  /**
   * Where the server's hint at `position` is drawn: after the label of a chip that ends there and
   * is collapsed in every editor showing it (so it reads `@Title 2 msgs · 1.2 / 64 KB`, the URI out
   * of sight after it); anywhere else, where the server put it.
   */
  hintAt(document: vscode.TextDocument, position: vscode.Position): vscode.Position {
    const offset = document.offsetAt(position);
    const chip = this.judged.get(document.uri.toString())?.chips.find((candidate) => candidate.mention.end === offset);
    if (chip === undefined) {
      return position;
    }
    const editors = vscode.window.visibleTextEditors.filter((editor) => editor.document === document);
    const shown = editors.every((editor) => collapsed([chip], editor.selections.map((selection) => ({ start: document.offsetAt(selection.start), end: document.offsetAt(selection.end) }))).length === 1);
    return shown && editors.length > 0 ? document.positionAt(chip.label.end) : position;
  }

  private draw(editor: vscode.TextEditor): void {
    const document = editor.document;
    const chips = this.judged.get(document.uri.toString())?.chips ?? [];
    const selections = editor.selections.map((selection) => ({ start: document.offsetAt(selection.start), end: document.offsetAt(selection.end) }));
    const shown = collapsed(chips, selections);
    const key = shown.map((chip) => `${chip.mention.start}:${chip.mention.end}`).join(',');
    if (this.drawn.get(editor) === key) {
      return;
    }
    const before = this.drawn.get(editor);
    this.drawn.set(editor, key);
    if (before !== undefined || key !== '') {
      this.controller.refreshInlayHints(); // the hints of chips collapsed or written out move
    }
    const range = (span: Span): vscode.Range => new vscode.Range(document.positionAt(span.start), document.positionAt(span.end));
    editor.setDecorations(this.hidden, shown.flatMap((chip) => chip.hidden.map(range)));
    editor.setDecorations(this.chipStart, shown.map((chip) => range(chip.at)));
    editor.setDecorations(this.chipEnd, shown.map((chip) => range(chip.label)));
  }

  private forget(uri: string): void {
    this.judged.delete(uri);
    clearTimeout(this.timers.get(uri));
    this.timers.delete(uri);
    this.asking.get(uri)?.cancel();
  }

  dispose(): void {
    for (const timer of this.timers.values()) {
      clearTimeout(timer);
    }
    for (const asking of this.asking.values()) {
      asking.cancel();
    }
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }
}
