// The read-only `dsh-preview:` documents. The preview command's reply carries the full text, so
// it is served from here first; a preview VS Code reopens later (after a reload) is fetched from
// the server's `workspace/textDocumentContent`. Re-running the command updates an open preview
// in place instead of opening another tab.

import * as vscode from 'vscode';

import { PREVIEW_SCHEME } from './protocol';

export class PreviewDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changeEmitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changeEmitter.event;

  constructor(private readonly fetchFromServer: (uri: vscode.Uri) => Promise<string | undefined>) {}

  register(): vscode.Disposable {
    return vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, this);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const key = uri.toString();
    const cached = this.texts.get(key);
    if (cached !== undefined) {
      return cached;
    }
    const fetched = await this.fetchFromServer(uri);
    if (fetched !== undefined) {
      this.texts.set(key, fetched);
      return fetched;
    }
    return 'This preview is out of date. Run "DSH: Preview referenced-session context" on the prompt again.\n';
  }

  update(uri: vscode.Uri, text: string): void {
    const key = uri.toString();
    if (this.texts.get(key) !== text) {
      this.texts.set(key, text);
      this.changeEmitter.fire(uri);
    }
  }

  /** Shows the preview beside the editor, or where it is already open, keeping focus on the prompt. */
  async show(uri: vscode.Uri): Promise<boolean> {
    const document = await vscode.workspace.openTextDocument(uri);
    const existing = vscode.window.visibleTextEditors.find((editor) => editor.document.uri.toString() === uri.toString());
    await vscode.window.showTextDocument(document, {
      viewColumn: existing?.viewColumn ?? vscode.ViewColumn.Beside,
      preserveFocus: true,
      preview: true,
    });
    return true;
  }

  dispose(): void {
    this.changeEmitter.dispose();
    this.texts.clear();
  }
}
