// The read-only `dsh-preview:` documents. The preview command's reply carries the full text, so
// it is served from here first; a preview VS Code reopens later (after a reload) is fetched from
// the server's `workspace/textDocumentContent`. Re-running the command updates an open preview
// in place instead of opening another tab. A preview that can no longer be prepared again keeps
// its last text under an "OUT OF DATE" notice, one whose prompt is gone under a notice saying so.
// What keeps each open preview following its prompt is previewFollower.ts.
//
// Served as a read-only file system, not a text document content provider: VS Code keeps no
// editor of a content provider's document across a reload, and left the editor group the preview
// had opened beside the prompt empty. A file system's editors are restored in their group, and
// read here again.

import * as vscode from 'vscode';

import { promptGoneNotice, staleNotice } from './format';
import { PREVIEW_SCHEME, promptOfPreview } from './protocol';

/** The language of previews (package.json): word wrap on, no brackets. */
export const PREVIEW_LANGUAGE = 'dsh-preview';

/** The prompt a preview follows, as VS Code writes its URI (the key its documents are found by). */
export function promptUriOf(preview: vscode.Uri): vscode.Uri | undefined {
  const prompt = promptOfPreview(preview.toString());
  return prompt === undefined ? undefined : vscode.Uri.parse(prompt);
}

interface Prepared {
  readonly text: string;
  readonly at: Date;
}

export class PreviewDocuments implements vscode.FileSystemProvider, vscode.TextDocumentContentProvider, vscode.Disposable {
  /** What each preview shows: the last prepared text, with a notice above it while stale. */
  private readonly texts = new Map<string, string>();
  private readonly prepared = new Map<string, Prepared>();
  /** When each preview's text last changed: VS Code reads a file again only when its mtime moves. */
  private readonly changedAt = new Map<string, number>();
  private readonly changeEmitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changeEmitter.event;

  constructor(private readonly fetchFromServer: (uri: vscode.Uri) => Promise<string | undefined>) {}

  register(): vscode.Disposable {
    const readonly = new vscode.MarkdownString(
      'The context dsh would send with the prompt; it follows the prompt. Run **DSH: Preview referenced-session context** to prepare it again.',
    );
    return vscode.workspace.registerFileSystemProvider(PREVIEW_SCHEME, this, { isCaseSensitive: true, isReadonly: readonly });
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const text = await this.provideTextDocumentContent(uri);
    return { type: vscode.FileType.File, ctime: 0, mtime: this.changedAt.get(uri.toString()) ?? 0, size: Buffer.byteLength(text, 'utf8') };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    return Buffer.from(await this.provideTextDocumentContent(uri), 'utf8');
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined); // every change is reported (onDidChangeFile)
  }

  readDirectory(uri: vscode.Uri): [string, vscode.FileType][] {
    throw vscode.FileSystemError.FileNotADirectory(uri);
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  writeFile(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  private changed(uri: vscode.Uri): void {
    const key = uri.toString();
    this.changedAt.set(key, Math.max(Date.now(), (this.changedAt.get(key) ?? 0) + 1));
    this.changeEmitter.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const key = uri.toString();
    const cached = this.texts.get(key);
    if (cached !== undefined) {
      return cached;
    }
    const fetched = await this.fetchFromServer(uri);
    if (fetched !== undefined) {
      this.prepared.set(key, { text: fetched, at: new Date() });
      this.texts.set(key, fetched);
      return fetched;
    }
    const last = this.prepared.get(key);
    if (last !== undefined) {
      return staleNotice('preparing it again failed', last.at) + last.text;
    }
    return 'This preview is out of date. Run "DSH: Preview referenced-session context" on the prompt again.\n';
  }

  /** A freshly prepared text (clears any stale notice), under `notice` when one is given. */
  update(uri: vscode.Uri, text: string, notice = ''): void {
    const key = uri.toString();
    this.prepared.set(key, { text, at: new Date() });
    this.display(key, uri, notice + text);
  }

  /** When the preview was last prepared (undefined: never in this window). */
  preparedAt(uri: vscode.Uri): Date | undefined {
    return this.prepared.get(uri.toString())?.at;
  }

  /** The previews this window holds a text of, open or not. */
  known(): vscode.Uri[] {
    return [...this.texts.keys()].map((key) => vscode.Uri.parse(key));
  }

  /** Drops a preview's text (its document closed, or its prompt changed while it was not open):
   * the next read asks the server, which prepares it from the prompt as it is then. */
  forget(uri: vscode.Uri): void {
    const key = uri.toString();
    this.texts.delete(key);
    this.prepared.delete(key);
  }

  /** The prompt of the preview is gone: its last text, under a notice that says so. */
  markGone(uri: vscode.Uri, name: string): void {
    const key = uri.toString();
    const last = this.prepared.get(key);
    this.display(key, uri, promptGoneNotice(name, false, last?.at ?? new Date()) + (last?.text ?? ''));
  }

  /** Keeps the last prepared text, under a notice that says why it may no longer be current. */
  markStale(uri: vscode.Uri, reason: string): void {
    const key = uri.toString();
    const last = this.prepared.get(key);
    if (last !== undefined) {
      this.display(key, uri, staleNotice(reason, last.at) + last.text);
    }
  }

  private display(key: string, uri: vscode.Uri, text: string): void {
    if (this.texts.get(key) !== text) {
      this.texts.set(key, text);
      this.changed(uri);
    }
  }

  /**
   * Gives every preview document the preview language, those the window restores after a reload
   * (opened by VS Code, not by {@link show}) and the model-facing text included: without it they
   * read as plain text, unwrapped.
   */
  static keepLanguage(): vscode.Disposable {
    const adopt = (document: vscode.TextDocument): void => {
      if (document.uri.scheme === PREVIEW_SCHEME && document.languageId !== PREVIEW_LANGUAGE) {
        void vscode.languages.setTextDocumentLanguage(document, PREVIEW_LANGUAGE);
      }
    };
    vscode.workspace.textDocuments.forEach(adopt);
    return vscode.workspace.onDidOpenTextDocument(adopt);
  }

  /** Shows the preview beside the editor, or where it is already open, keeping focus on the prompt. */
  async show(uri: vscode.Uri): Promise<boolean> {
    let document = await vscode.workspace.openTextDocument(uri);
    if (document.languageId !== PREVIEW_LANGUAGE) {
      // Read as prose: wrapped at the pane's width, no bracket matching over message text.
      document = await vscode.languages.setTextDocumentLanguage(document, PREVIEW_LANGUAGE);
    }
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
    this.prepared.clear();
    this.changedAt.clear();
  }
}

/**
 * The previews the extension's own commands show. The server also asks to show each of them
 * (`window/showDocument`), possibly just after its reply; that request is then answered without
 * opening the document a second time (it would race the reply and flash a stale text).
 */
export class PreviewRequests {
  private inFlight = 0;
  private readonly shownAt = new Map<string, number>();

  /** Runs a preview command; while it runs, the server's requests to show a preview are ours. */
  async during<T>(command: () => Promise<T>): Promise<T> {
    this.inFlight += 1;
    try {
      return await command();
    } finally {
      this.inFlight -= 1;
    }
  }

  /** Records that a preview command showed `uri`. */
  shown(uri: vscode.Uri): void {
    this.shownAt.set(uri.toString(), Date.now());
  }

  /** True when the server's request to show `uri` is one a command has shown or is showing. */
  ours(uri: vscode.Uri): boolean {
    const shownAt = this.shownAt.get(uri.toString());
    return this.inFlight > 0 || (shownAt !== undefined && Date.now() - shownAt < 10_000);
  }
}
