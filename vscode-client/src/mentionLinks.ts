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

/** Run by a Ctrl+click that lands exactly where a broken mention's link target starts (see below). */
export const BROKEN_MENTION_COMMAND = 'dshSessionReference.brokenMentionClicked';

/**
 * VS Code's Markdown support makes every `[label](uri)` a link, a broken or unknown mention's
 * too: its hover offered "Follow link", and a Ctrl+click opened an empty tab named after the
 * payload. A broken mention is no link. No extension can take back another's link, but VS Code
 * merges the links of all providers and drops a link that touches one from a provider asked after
 * it (the newer registration, at the same score): this provider, registered once the Markdown
 * support has registered its own, gives each target the server did not link (a broken or unknown
 * mention) an empty link at the target's first character, which takes the Markdown link's place.
 * An empty link has no text to hover or underline; a click exactly at its position only says why
 * in the status bar.
 */
export class BrokenMentionLinks implements vscode.DocumentLinkProvider {
  private constructor(private readonly controller: ServerController) {}

  /**
   * Registered once the Markdown support is active, and again each time the server starts: a
   * registration makes VS Code ask every open editor's links again (the server can tell which
   * mentions are sound only once it runs), and keeps this provider the newest.
   */
  static register(controller: ServerController): vscode.Disposable {
    const provider = new BrokenMentionLinks(controller);
    let registration: vscode.Disposable | undefined;
    let disposed = false;
    const registerAgain = (): void => {
      registration?.dispose();
      registration = disposed ? undefined : vscode.languages.registerDocumentLinkProvider({ language: 'markdown' }, provider);
    };
    const markdown = vscode.extensions.getExtension('vscode.markdown-language-features');
    void Promise.resolve(markdown?.activate()).then(registerAgain, (error: unknown) => {
      controller.output.info(`the Markdown extension did not activate: ${errorText(error)}`);
      registerAgain();
    });
    return vscode.Disposable.from(
      controller.onDidStart(registerAgain),
      vscode.commands.registerCommand(BROKEN_MENTION_COMMAND, () => {
        vscode.window.setStatusBarMessage('$(warning) DSH: this mention names no session it can open; see the problem reported on it', 8000);
      }),
      new vscode.Disposable(() => {
        disposed = true;
        registration?.dispose();
      }),
    );
  }

  async provideDocumentLinks(document: vscode.TextDocument, token: vscode.CancellationToken): Promise<vscode.DocumentLink[]> {
    if (!this.controller.selects(document) || this.controller.state !== 'running') {
      return [];
    }
    let links: unknown;
    try {
      links = await this.controller.documentLinks(document.uri, token);
    } catch {
      return []; // cancelled, or the server stopped: VS Code asks again after the next edit
    }
    if (token.isCancellationRequested || !Array.isArray(links)) {
      return [];
    }
    const linked = links.flatMap((link): Span[] => {
      const range = (link as { range?: { start?: vscode.Position; end?: vscode.Position } } | null)?.range;
      if (range?.start === undefined || range.end === undefined) {
        return [];
      }
      const start = document.offsetAt(new vscode.Position(range.start.line, range.start.character));
      return [{ start, end: document.offsetAt(new vscode.Position(range.end.line, range.end.character)) }];
    });
    const target = vscode.Uri.parse(`command:${BROKEN_MENTION_COMMAND}`);
    return unlinkedTargets(document.getText(), linked).map((offset) => {
      const at = document.positionAt(offset);
      return new vscode.DocumentLink(new vscode.Range(at, at), target);
    });
  }
}
