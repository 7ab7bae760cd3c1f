// The status bar item: target session, number of mentions and their estimated context size for
// the active prompt. Refreshed after edits settle and after the server republishes diagnostics,
// so it never shows the size of a text the server has not seen yet.

import * as vscode from 'vscode';

import { errorText, formatStatus, interpreterLine, statusTarget } from './format';
import { asDocumentSummary, DocumentSummary, PREVIEW_SCHEME, SERVER_COMMANDS } from './protocol';
import { promptUriOf } from './preview';
import { ServerController } from './serverController';
import { TargetStore } from './targetPicker';

const REFRESH_DELAY_MS = 300;

/**
 * The prompt whose figures the item shows: the active editor's document, or, with a preview in
 * front, the prompt it previews (kept current like any other: a setting changed while the preview
 * has the focus changes the figures beside it too).
 */
function shownPrompt(): vscode.TextDocument | undefined {
  const document = vscode.window.activeTextEditor?.document;
  if (document?.uri.scheme !== PREVIEW_SCHEME) {
    return document;
  }
  const prompt = promptUriOf(document.uri)?.toString();
  return vscode.workspace.textDocuments.find((candidate) => candidate.uri.toString() === prompt);
}

export class MentionStatus implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('dshSessionReference.status', vscode.StatusBarAlignment.Right, 100);
  private readonly disposables: vscode.Disposable[] = [this.item];
  private timer: NodeJS.Timeout | undefined;
  private generation = 0;
  /** The figures last read for each prompt (see refresh). */
  private readonly figures = new Map<string, string>();

  constructor(
    private readonly controller: ServerController,
    private readonly targets: TargetStore,
  ) {
    this.item.name = 'DSH Session Reference';
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor(() => this.schedule(0)),
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.document === shownPrompt()) {
          this.schedule(REFRESH_DELAY_MS);
        }
      }),
      vscode.languages.onDidChangeDiagnostics((event) => {
        const active = shownPrompt()?.uri.toString();
        if (event.uris.some((uri) => uri.toString() === active)) {
          this.schedule(REFRESH_DELAY_MS);
        }
      }),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration('dshSessionReference')) {
          this.schedule(REFRESH_DELAY_MS);
        }
      }),
      controller.onDidChangeState(() => this.schedule(0)),
    );
    this.schedule(0);
  }

  schedule(delayMs: number): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.refresh();
    }, delayMs);
  }

  private async refresh(): Promise<void> {
    const generation = ++this.generation;
    const document = shownPrompt();
    if (document === undefined || !this.controller.selects(document)) {
      this.item.hide();
      return;
    }
    if (this.controller.state !== 'running') {
      const starting = this.controller.state === 'starting';
      this.item.text = starting ? '$(sync~spin) DSH' : '$(warning) DSH server stopped';
      this.item.tooltip = starting ? 'The DSH Session Reference server is starting.' : 'The server is not running. Click to see its output.';
      this.item.command = starting ? undefined : 'dshSessionReference.showOutput';
      this.item.backgroundColor = starting ? undefined : new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.show();
      return;
    }
    let summary: DocumentSummary | undefined;
    try {
      summary = asDocumentSummary(await this.controller.executeCommand(SERVER_COMMANDS.documentSummary, [document.uri.toString()]));
    } catch (error) {
      this.controller.output.warn(`status bar: ${errorText(error)}`);
    }
    if (generation !== this.generation) {
      return;
    }
    // The code lens shows the same figures: when they changed, VS Code is asked for it again.
    const figures = summary === undefined ? undefined : JSON.stringify([summary.mentions, summary.sessions, summary.errors, summary.bytes, summary.tokens]);
    if (figures !== undefined && this.figures.get(document.uri.toString()) !== figures) {
      const known = this.figures.has(document.uri.toString());
      this.figures.set(document.uri.toString(), figures);
      if (known) {
        this.controller.refreshCodeLenses(document);
      }
    }
    // The server knows the target best (it also reads $DSH_SESSION_ID) and its title.
    const target = summary?.target;
    if (target) {
      await this.targets.remember(target.sessionId, target.label);
    }
    const status = formatStatus(statusTarget(target, this.targets.current()), summary);
    this.item.text = status.text;
    const interpreter = this.controller.interpreter;
    this.item.tooltip =
      interpreter === undefined ? status.tooltip : `${status.tooltip}\n${interpreterLine(interpreter.choice, interpreter.version)}`;
    this.item.command = 'dshSessionReference.previewContext';
    this.item.backgroundColor = undefined;
    this.item.show();
  }

  dispose(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
    }
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }
}
