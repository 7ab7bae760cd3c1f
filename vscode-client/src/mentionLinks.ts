// `dsh-session:` URIs as VS Code meets them outside the server's own links: Markdown makes every
// `[label](dsh-session:…)` a link, and following one asked VS Code to open a document at that URI,
// which nothing serves: an empty tab named after the payload and a modal error, for a broken
// mention as for a valid one. This provider serves the scheme for just long enough to turn the
// click into what the mention means: the session's transcript (what Go to Definition opens), or,
// for a URI that is no session's, a status bar message saying why. The tab VS Code opened for the
// URI itself is closed again. The URI is judged by the server (its `transcript` command takes a
// `dsh-session:` URI), never parsed here.

import * as vscode from 'vscode';

import { errorText } from './format';

export const SESSION_SCHEME = 'dsh-session';

/** Asks the server for the transcript URI a `dsh-session:` URI stands for (throws why not). */
export type TranscriptOf = (sessionUri: string) => Promise<string>;

export class MentionLinks implements vscode.TextDocumentContentProvider {
  constructor(private readonly transcriptOf: TranscriptOf) {}

  register(): vscode.Disposable {
    return vscode.workspace.registerTextDocumentContentProvider(SESSION_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    void this.follow(uri);
    return 'Opening the session this mention names…\n';
  }

  private async follow(uri: vscode.Uri): Promise<void> {
    const written = uri.toString(true);
    try {
      const transcript = vscode.Uri.parse(await this.transcriptOf(written));
      await vscode.window.showTextDocument(transcript, { preview: true });
    } catch (error) {
      vscode.window.setStatusBarMessage(`$(warning) DSH: ${errorText(error)}`, 8000);
    } finally {
      await closeTabsOf(uri);
    }
  }
}

/** Closes the tabs showing `uri`, once VS Code has opened them (it opens one after asking for its text). */
async function closeTabsOf(uri: vscode.Uri): Promise<void> {
  const key = uri.toString();
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const tabs = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => tab.input instanceof vscode.TabInputText && tab.input.uri.toString() === key);
    if (tabs.length > 0) {
      await vscode.window.tabGroups.close(tabs);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
