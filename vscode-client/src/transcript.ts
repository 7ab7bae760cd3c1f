// The read-only `dsh-transcript:` documents: a session's conversation as the server renders it,
// opened by Go to Definition or a link on a mention, or from Go to Symbol in Workspace. The text
// always comes from the server (`workspace/textDocumentContent`, else its `transcript` command),
// so a transcript follows its session log: when the server says the log changed, the open
// document is fetched again. While the server cannot answer, the last text stays under an
// "OUT OF DATE" notice.

import * as vscode from 'vscode';

import { staleNotice } from './format';
import { changedContent, TRANSCRIPT_SCHEME } from './protocol';
import type { ServerController } from './serverController';

interface Fetched {
  readonly text: string;
  readonly at: Date;
}

/** Asks the server for a transcript's text; undefined when it cannot say (not running, no such session). */
export type TranscriptFetcher = (uri: vscode.Uri, token?: vscode.CancellationToken) => Promise<string | undefined>;

export class TranscriptDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly last = new Map<string, Fetched>();
  private readonly changeEmitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changeEmitter.event;

  constructor(private readonly fetch: TranscriptFetcher) {}

  register(): vscode.Disposable {
    return vscode.workspace.registerTextDocumentContentProvider(TRANSCRIPT_SCHEME, this);
  }

  /**
   * Keeps the open transcripts following the server: fetched again when it says their session
   * logs changed and when it (re)starts; the text of one closed is forgotten.
   */
  follow(controller: ServerController): vscode.Disposable[] {
    if (controller.state === 'running') {
      this.refresh(); // it started before this existed (ServerController.startEarly): as if it started now
    }
    return [
      controller.onDidChangeContent((params) => this.refresh(changedContent(params).transcripts.map((uri) => vscode.Uri.parse(uri)))),
      controller.onDidChangeState((state) => {
        if (state === 'running') {
          this.refresh();
        }
      }),
      vscode.workspace.onDidCloseTextDocument((document) => {
        if (document.uri.scheme === TRANSCRIPT_SCHEME) {
          this.forget(document.uri);
        }
      }),
    ];
  }

  async provideTextDocumentContent(uri: vscode.Uri, token?: vscode.CancellationToken): Promise<string> {
    const key = uri.toString();
    const text = await this.fetch(uri, token);
    if (text !== undefined) {
      this.last.set(key, { text, at: new Date() });
      return text;
    }
    const last = this.last.get(key);
    if (last !== undefined) {
      return staleNotice('the DSH language server could not read this session again', last.at) + last.text;
    }
    return 'This transcript cannot be shown: the DSH language server is not running or no longer lists the session.\n';
  }

  /** Fetches the open transcripts among `uris` again (all open ones when undefined). */
  refresh(uris?: readonly vscode.Uri[]): void {
    const open = vscode.workspace.textDocuments.filter((doc) => doc.uri.scheme === TRANSCRIPT_SCHEME).map((doc) => doc.uri);
    const wanted = uris === undefined ? undefined : new Set(uris.map((uri) => uri.toString()));
    for (const uri of open) {
      if (wanted === undefined || wanted.has(uri.toString())) {
        this.changeEmitter.fire(uri);
      }
    }
  }

  /** Forgets the texts of transcripts no longer open. */
  forget(uri: vscode.Uri): void {
    this.last.delete(uri.toString());
  }

  dispose(): void {
    this.changeEmitter.dispose();
    this.last.clear();
  }
}
