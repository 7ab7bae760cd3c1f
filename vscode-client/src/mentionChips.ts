// Mentions read as chips: in every editor of a prompt, a sound mention shows as `@Title` on a
// tinted background with its cost hint after it, its `[` and `](dsh-session:…)` out of sight.
// The text itself never changes, so copy, search, undo and the cursor's columns are the
// document's; a mention a cursor or selection touches is shown as written, so it is edited as
// text. Which mentions are sound is the server's word (see chips.ts): its transcript links and
// its error and warning diagnostics (a label that is not the title of the session it sends is a
// warning: such a mention is never drawn as a chip, so it cannot read as another session).
//
// VS Code gives extensions no way to take characters out of a line's layout: the characters are
// hidden by the decoration's CSS (`display: none`), and soft wrapping still counts them (both of
// its line-break computers, `simple` and `advanced`, measure a line's text and injected text such
// as inlay hints, never decorations; folding hides whole lines only). On a wrapped line a hidden
// URI (about 65 columns) would leave blank rows, or rows cut short, between a chip and the words
// after it, and Home/End would act on rows of hidden text. So a chip is drawn only on a line VS
// Code lays out on one row: `editor.wordWrap` off, or a set `wordWrapColumn` that the line, its
// hints included, fits in (chips.ts `wrapColumn`, `oneRow`). Where the wrap follows the editor's
// width (`on`, `bounded`, Markdown's default) the extension cannot know it (the API gives no
// editor width), so a mention reads as written there, tinted as a mention, its URI dimmed: its
// line wraps by the text a person reads. A chip's cost hint is drawn right after its label
// (`hintAt`), so it reads `@Title 2 msgs · …`.

import * as vscode from 'vscode';

import { Change, Chip, chipOf, collapsed, columns, flagged, oneRow, shiftChips, soundMentions, Span, wrapColumn } from './chips';
import { errorText } from './format';
import { DIAGNOSTIC_SOURCE, transcriptLinkRanges } from './protocol';
import { ServerController } from './serverController';
import { SECTION } from './settings';

/** Quiet time after an edit or new diagnostics before the server is asked again. */
const REFRESH_MS = 250;
/** At most this many chips per document; a document with more shows the rest as written. */
const MAX_CHIPS = 2000;
export const COLLAPSE_SETTING = 'collapseMentions';
/** Columns taken for the hint of a chip whose line's hints VS Code has not asked for yet. */
const HINT_ALLOWANCE = 32;
/** The editor settings that decide where a line wraps. */
const WRAP_SETTINGS = ['editor.wordWrap', 'editor.wordWrapColumn', 'editor.wrappingStrategy', 'editor.tabSize'];
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
  /** A written-out mention's `(dsh-session:…)`, dimmed: its `@[label]` is tinted as a chip's. */
  private readonly uri = vscode.window.createTextEditorDecorationType({ textDecoration: 'none; opacity: 0.6' });
  private readonly judged = new Map<string, Judged>();
  /** Per document, the columns the inlay hints take in each line holding a chip, as last drawn. */
  private readonly hintColumns = new Map<string, Map<number, number>>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly asking = new Map<string, vscode.CancellationTokenSource>();
  /** What each editor shows collapsed now, so a cursor move that changes nothing redraws nothing. */
  private readonly drawn = new WeakMap<vscode.TextEditor, string>();
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly controller: ServerController) {
    controller.placeHints = (document, position) => this.hintAt(document, position);
    controller.hintsPlaced = (document, range, hints) => this.hintsPlaced(document, range, hints);
    this.disposables = [
      this.hidden,
      this.chipStart,
      this.chipEnd,
      this.uri,
      vscode.window.onDidChangeTextEditorOptions((event) => this.draw(event.textEditor)),
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
        const settings = [`${SECTION}.${COLLAPSE_SETTING}`, `${SECTION}.documentSelector`, ...WRAP_SETTINGS];
        if (settings.some((setting) => event.affectsConfiguration(setting))) {
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
      links = await this.controller.documentLinks(document, asking.token);
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
      .filter((diagnostic) => diagnostic.source === DIAGNOSTIC_SOURCE && flagged(diagnostic.severity))
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
    const shown = editors.every((editor) => this.shownIn(editor).includes(chip));
    return shown && editors.length > 0 ? document.positionAt(chip.label.end) : position;
  }

  /**
   * Records the columns the hints VS Code drew in `range` take in each line holding a chip, and
   * redraws the document's editors where that changes whether a chip's line fits one row.
   */
  hintsPlaced(document: vscode.TextDocument, range: vscode.Range, hints: readonly vscode.InlayHint[]): void {
    const uri = document.uri.toString();
    const chips = this.judged.get(uri)?.chips ?? [];
    const lines = this.hintColumns.get(uri) ?? new Map<number, number>();
    const fresh = new Map<number, number>();
    for (const chip of chips) {
      const line = document.positionAt(chip.mention.start).line;
      if (line >= range.start.line && line <= range.end.line) {
        fresh.set(line, 0);
      }
    }
    for (const hint of hints) {
      const line = hint.position.line;
      if (fresh.has(line)) {
        const label = typeof hint.label === 'string' ? hint.label : hint.label.map((part) => part.value).join('');
        fresh.set(line, (fresh.get(line) ?? 0) + columns(label, 1) + (hint.paddingLeft === true ? 1 : 0) + (hint.paddingRight === true ? 1 : 0));
      }
    }
    const changed = [...fresh].some(([line, width]) => lines.get(line) !== width);
    for (const [line, width] of fresh) {
      lines.set(line, width);
    }
    this.hintColumns.set(uri, lines);
    if (changed) {
      this.drawAll(uri);
    }
  }

  /**
   * The chips `editor` shows collapsed: those no selection touches, on a line VS Code lays out on
   * one row (the header says why).
   */
  private shownIn(editor: vscode.TextEditor): Chip[] {
    const document = editor.document;
    const uri = document.uri.toString();
    const chips = this.judged.get(uri)?.chips ?? [];
    const selections = editor.selections.map((selection) => ({ start: document.offsetAt(selection.start), end: document.offsetAt(selection.end) }));
    const settings = vscode.workspace.getConfiguration('editor', document);
    const column = wrapColumn(settings.get<string>('wordWrap', 'off'), settings.get<number>('wordWrapColumn', 80), settings.get<string>('wrappingStrategy', 'simple'));
    const tabSize = typeof editor.options.tabSize === 'number' ? editor.options.tabSize : 4;
    const hints = this.hintColumns.get(uri);
    const perLine = new Map<number, number>();
    for (const chip of chips) {
      const line = document.positionAt(chip.mention.start).line;
      perLine.set(line, (perLine.get(line) ?? 0) + 1);
    }
    // Measured once per line, not once per chip: a long line holding many chips was measured
    // whole for each of them, on every draw and for every hint placed.
    const fits = new Map<number, boolean>();
    return collapsed(chips, selections).filter((chip) => {
      const line = document.positionAt(chip.mention.start).line;
      let fit = fits.get(line);
      if (fit === undefined) {
        const hintColumns = hints?.get(line) ?? HINT_ALLOWANCE * (perLine.get(line) ?? 1);
        fit = oneRow(document.lineAt(line).text, tabSize, hintColumns, column);
        fits.set(line, fit);
      }
      return fit;
    });
  }

  private draw(editor: vscode.TextEditor): void {
    const document = editor.document;
    const chips = this.judged.get(document.uri.toString())?.chips ?? [];
    const shown = this.shownIn(editor);
    const written = chips.filter((chip) => !shown.includes(chip));
    const spans = (some: Chip[]): string => some.map((chip) => `${chip.mention.start}:${chip.mention.end}`).join(',');
    const key = `${spans(shown)}|${spans(written)}`;
    if (this.drawn.get(editor) === key) {
      return;
    }
    const before = this.drawn.get(editor);
    this.drawn.set(editor, key);
    if (before !== undefined || key !== '|') {
      this.controller.refreshInlayHints(); // the hints of chips collapsed or written out move
    }
    const range = (span: Span): vscode.Range => new vscode.Range(document.positionAt(span.start), document.positionAt(span.end));
    editor.setDecorations(this.hidden, shown.flatMap((chip) => chip.hidden.map(range)));
    // Written out: `@[` and `label]` tinted as the chip's `@` and label, the URI after them dimmed.
    editor.setDecorations(this.chipStart, [
      ...shown.map((chip) => range(chip.at)),
      ...written.map((chip) => range({ start: chip.at.start, end: chip.hidden[0].end })),
    ]);
    editor.setDecorations(this.chipEnd, [
      ...shown.map((chip) => range(chip.label)),
      ...written.map((chip) => range({ start: chip.label.start, end: chip.hidden[1].start + 1 })),
    ]);
    editor.setDecorations(this.uri, written.map((chip) => range({ start: chip.hidden[1].start + 1, end: chip.mention.end })));
  }

  private forget(uri: string): void {
    this.judged.delete(uri);
    this.hintColumns.delete(uri);
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
