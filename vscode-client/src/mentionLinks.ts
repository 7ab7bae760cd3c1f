// `dsh-session:` URIs as VS Code meets them outside the server's own links: Markdown makes every
// `[label](dsh-session:…)` a link, and following one asked VS Code to open a document at that URI,
// which nothing serves: an empty tab named after the payload and a modal error, for a broken
// mention as for a valid one. This provider serves the scheme for just long enough to turn the
// click into what the mention means: the session's transcript (what Go to Definition opens), or,
// for a URI that is no session's, a status bar message saying why. The tab VS Code opened for the
// URI itself is closed again. The URI is judged by the server (its `transcript` command takes a
// `dsh-session:` URI), never parsed here.

import * as vscode from 'vscode';

import { Span, unlinkedTargets } from './chips';
import { errorText } from './format';
import { linkedRanges } from './protocol';
import { ServerController } from './serverController';

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

/** Run by a Ctrl+click on the boundary where a broken mention's link target starts (see below). */
export const BROKEN_MENTION_COMMAND = 'dshSessionReference.brokenMentionClicked';

/**
 * VS Code's Markdown support makes every `[label](uri)` a link, a broken or unknown mention's
 * too: its hover offered "Follow link", and a Ctrl+click opened a tab for its URI. A broken
 * mention is no link. No extension can take back another's link, but VS Code merges the links of
 * all providers, and a link drops each link it touches that came from a provider merged before
 * it: built-in extensions' providers are merged first (VS Code orders them after all others of
 * the same score, then reverses the order to merge), so an extension's link displaces the
 * Markdown one. This provider gives each target the server did not link (a broken or unknown
 * mention) an empty link where the target starts. An empty link has nothing to underline; its
 * hover shows only with the pointer within a pixel of that boundary, and a Ctrl+click there only
 * says in the status bar why the mention opens nothing. A target the server links keeps the
 * server's link (over the whole mention), never touched by one of these.
 */
export class BrokenMentionLinks implements vscode.DocumentLinkProvider {
  private constructor(private readonly controller: ServerController) {}

  /**
   * Registered at once, and again each time the server starts: a registration makes VS Code ask
   * every open editor for its links again, and the server can tell which mentions are sound only
   * once it runs (until then the Markdown links stand, and `MentionLinks` answers a click).
   */
  static register(controller: ServerController): vscode.Disposable {
    const provider = new BrokenMentionLinks(controller);
    let registration: vscode.Disposable | undefined;
    const registerAgain = (): void => {
      registration?.dispose();
      registration = vscode.languages.registerDocumentLinkProvider({ language: 'markdown' }, provider);
    };
    registerAgain();
    return vscode.Disposable.from(
      controller.onDidStart(registerAgain),
      vscode.commands.registerCommand(BROKEN_MENTION_COMMAND, () => {
        vscode.window.setStatusBarMessage('$(warning) DSH: this mention names no session it can open; see the problem reported on it', 8000);
      }),
      new vscode.Disposable(() => registration?.dispose()),
    );
  }

  async provideDocumentLinks(document: vscode.TextDocument, token: vscode.CancellationToken): Promise<vscode.DocumentLink[]> {
    if (!this.controller.selects(document) || this.controller.state !== 'running') {
      return [];
    }
    let links: unknown;
    try {
      links = await this.controller.documentLinks(document, token);
    } catch {
      return []; // cancelled, or the server stopped: VS Code asks again after the next edit or start
    }
    if (token.isCancellationRequested) {
      return [];
    }
    const linked = linkedRanges(links).map(
      (range): Span => ({
        start: document.offsetAt(new vscode.Position(range.start.line, range.start.character)),
        end: document.offsetAt(new vscode.Position(range.end.line, range.end.character)),
      }),
    );
    const target = vscode.Uri.parse(`command:${BROKEN_MENTION_COMMAND}`);
    return unlinkedTargets(document.getText(), linked).map((offset) => {
      const at = document.positionAt(offset);
      // `new vscode.DocumentLink` refuses an empty range (it throws); VS Code reads only the fields.
      return { range: new vscode.Range(at, at), target, tooltip: 'No session to open: see the problem reported on this mention' };
    });
  }
}
