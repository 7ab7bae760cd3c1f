// "DSH: Preview referenced-session context" and "DSH: Show model-facing text": run by the menus
// and the status bar with no argument (the active editor), by the explorer with a Uri, and by the
// server's "Preview" code lens with [documentUri] as a string. With a preview in front, its prompt.

import * as vscode from 'vscode';

import { errorText } from './format';
import { PreviewDocuments, promptUriOf } from './preview';
import { asPreviewResult, CLIENT_COMMANDS, PREVIEW_SCHEME, SERVER_COMMANDS } from './protocol';
import type { ServerController } from './serverController';

export class PreviewCommands implements vscode.Disposable {
  /**
   * The summary a preview leaves in the status bar for a few seconds. It goes as soon as a prompt
   * or a setting changes: it would read beside figures that no longer agree with it.
   */
  private summaryMessage: vscode.Disposable | undefined;

  constructor(
    private readonly controller: ServerController,
    private readonly previews: PreviewDocuments,
  ) {}

  register(): vscode.Disposable[] {
    return [
      this,
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.document.uri.scheme !== PREVIEW_SCHEME && event.contentChanges.length > 0 && this.controller.selects(event.document)) {
          this.dropSummary();
        }
      }),
      vscode.workspace.onDidChangeConfiguration(() => this.dropSummary()),
      vscode.commands.registerCommand(CLIENT_COMMANDS.previewContext, (resource?: vscode.Uri | string) => this.previewContext(resource)),
      vscode.commands.registerCommand(CLIENT_COMMANDS.showModelText, (resource?: vscode.Uri | string) => this.showModelText(resource)),
    ];
  }

  dispose(): void {
    this.dropSummary();
  }

  private dropSummary(): void {
    this.summaryMessage?.dispose();
    this.summaryMessage = undefined;
  }

  private async previewContext(resource?: vscode.Uri | string): Promise<void> {
    const given = typeof resource === 'string' ? vscode.Uri.parse(resource) : resource;
    const shown = given instanceof vscode.Uri ? given : vscode.window.activeTextEditor?.document.uri;
    const uri = shown?.scheme === PREVIEW_SCHEME ? promptUriOf(shown) : shown;
    const document = uri === undefined ? undefined : vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri.toString());
    if (document === undefined || !this.controller.selects(document)) {
      void vscode.window.showInformationMessage(
        'Open a prompt (Markdown, plain text or DSH Prompt) to preview the context its session mentions add.',
      );
      return;
    }
    try {
      const result = asPreviewResult(await this.controller.executeCommand(SERVER_COMMANDS.preview, [document.uri.toString()]));
      await this.show(vscode.Uri.parse(result.uri), result.text);
      if (result.summary !== '') {
        this.summaryMessage?.dispose();
        this.summaryMessage = vscode.window.setStatusBarMessage(`DSH: ${result.summary}`, 6000);
      }
    } catch (error) {
      void vscode.window.showErrorMessage(`Could not preview the referenced-session context: ${errorText(error)}`);
    }
  }

  /**
   * The exact text the model receives (what `dsh-session-reference prepare` prints). The
   * preview's title bar passes the preview's own URI: its prompt is asked for.
   */
  private async showModelText(resource?: vscode.Uri | string): Promise<void> {
    const given = typeof resource === 'string' ? vscode.Uri.parse(resource) : resource;
    const shown = given ?? vscode.window.activeTextEditor?.document.uri;
    const target = shown?.scheme === PREVIEW_SCHEME ? promptUriOf(shown) : shown;
    if (target === undefined) {
      void vscode.window.showInformationMessage('Open a prompt to see the text the model receives for it.');
      return;
    }
    try {
      const result = asPreviewResult(await this.controller.executeCommand(SERVER_COMMANDS.modelText, [target.toString()]), SERVER_COMMANDS.modelText);
      await this.show(vscode.Uri.parse(result.uri), result.text);
    } catch (error) {
      void vscode.window.showErrorMessage(`Could not show the model-facing text: ${errorText(error)}`);
    }
  }

  private async show(uri: vscode.Uri, text: string): Promise<void> {
    this.previews.update(uri, text);
    this.controller.previewShown(uri);
    await this.previews.show(uri);
  }
}
