// Entry point: wires the server controller, the preview documents, the status bar and the
// commands. Each piece lives in its own module; this file only connects them.

import * as vscode from 'vscode';

import { atToken } from './atToken';
import { errorText } from './format';
import { goToSession } from './goToSession';
import { MentionChips } from './mentionChips';
import { MentionLinks } from './mentionLinks';
import { insertSessionMention } from './mentionPicker';
import { asPreviewResult, asTranscriptResult, changedContent, CLIENT_COMMANDS, PREVIEW_SCHEME, SERVER_COMMANDS, TRANSCRIPT_SCHEME } from './protocol';
import { PreviewDocuments, promptUriOf } from './preview';
import { PreviewFollower } from './previewFollower';
import { Sender } from './send';
import { CLIENT_NAME, ServerController } from './serverController';
import { MentionStatus } from './statusBar';
import { selectTargetSession, TargetStore } from './targetPicker';
import { TranscriptDocuments } from './transcript';

let controller: ServerController | undefined;

/** How long after a start the editor may not yet know the completion provider (see reopenCompletion). */
const STARTUP_RETRIGGER_MS = 2000;
/** How long after a keystroke in that time reopenCompletion looks whether its completion got rows. */
const REOPEN_CHECK_MS = 300;


export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
  let server: ServerController | undefined;
  const previews = new PreviewDocuments(async (uri) => server?.textDocumentContent(uri));
  const transcripts = new TranscriptDocuments(async (uri, token) => server?.transcriptText(uri, token));
  const providers = new Map<string, vscode.TextDocumentContentProvider>([
    [PREVIEW_SCHEME, previews],
    [TRANSCRIPT_SCHEME, transcripts],
  ]);
  server = new ServerController(context, output, (uri) => previews.show(uri), providers);
  controller = server;
  const targets = new TargetStore(context.workspaceState);
  const status = new MentionStatus(server, targets);
  const sender = new Sender(server);

  const updateContext = (): void => {
    const document = vscode.window.activeTextEditor?.document;
    const prompt = document !== undefined && server.selects(document);
    void vscode.commands.executeCommand('setContext', 'dshSessionReference.documentSelected', prompt);
    // Where Ctrl+T is "Go to session" (package.json's keybinding): a prompt or a transcript.
    void vscode.commands.executeCommand('setContext', 'dshSessionReference.sessionsAtHand', prompt || document?.uri.scheme === TRANSCRIPT_SCHEME);
  };

  // An `@` typed while the server was starting found no one to ask, and VS Code would not ask
  // again by itself: once the client has started, ask if the cursor sits on an `@` token. The
  // editor learns of the new completion provider a moment later still (its registration crosses
  // from the extension host; a clean-clone run typed `@` in that moment and got no popup), so for
  // STARTUP_RETRIGGER_MS a cursor that comes to sit on an `@` token asks again too.
  let startedAt = Number.NEGATIVE_INFINITY;
  const reopenCompletion = (): void => {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined || !server.selects(editor.document) || !editor.selection.isEmpty) {
      return;
    }
    const position = editor.selection.active;
    const before = editor.document.lineAt(position.line).text.slice(0, position.character);
    // The extension answers an `@` itself while the server starts (StartupCompletions): what is
    // left is one typed before it was active, or in that moment. One whose completion got rows has
    // its popup open, which VS Code asks again by itself when a provider registers (triggerSuggest
    // would close and reopen it).
    if (atToken(before) !== undefined && !server.completions.answeredAt(editor.document, position)) {
      void vscode.commands.executeCommand('editor.action.triggerSuggest');
    }
  };

  // The server's session logs changed under open transcripts: fetch them again (previews are
  // prepared again by the follower).
  const contentChanged = (params: unknown): void => {
    transcripts.refresh(changedContent(params).transcripts.map((uri) => vscode.Uri.parse(uri)));
  };

  // Run by the menus and the status bar with no argument (the active editor), by the explorer
  // with a Uri, and by the server's "Preview" code lens with [documentUri] as a string.
  // The summary a preview leaves in the status bar for a few seconds goes as soon as a prompt or a
  // setting changes: it would read beside figures that no longer agree with it.
  let summaryMessage: vscode.Disposable | undefined;
  const dropSummary = (): void => {
    summaryMessage?.dispose();
    summaryMessage = undefined;
  };
  // With a preview in front (the status bar item still shows its prompt's figures), its prompt.
  const previewContext = async (resource?: vscode.Uri | string): Promise<void> => {
    const given = typeof resource === 'string' ? vscode.Uri.parse(resource) : resource;
    const shown = given instanceof vscode.Uri ? given : vscode.window.activeTextEditor?.document.uri;
    const uri = shown?.scheme === PREVIEW_SCHEME ? promptUriOf(shown) : shown;
    const document = uri === undefined ? undefined : vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri.toString());
    if (document === undefined || !server.selects(document)) {
      void vscode.window.showInformationMessage(
        'Open a prompt (Markdown, plain text or DSH Prompt) to preview the context its session mentions add.',
      );
      return;
    }
    try {
      const result = asPreviewResult(await server.executeCommand(SERVER_COMMANDS.preview, [document.uri.toString()]));
      const uri = vscode.Uri.parse(result.uri);
      previews.update(uri, result.text);
      server.previewShown(uri);
      await previews.show(uri);
      if (result.summary !== '') {
        summaryMessage?.dispose();
        summaryMessage = vscode.window.setStatusBarMessage(`DSH: ${result.summary}`, 6000);
      }
    } catch (error) {
      void vscode.window.showErrorMessage(`Could not preview the referenced-session context: ${errorText(error)}`);
    }
  };

  // The exact text the model receives (what `dsh-session-reference prepare` prints), for the
  // active prompt, or for the prompt of the preview in front. The preview's title bar passes the
  // preview's own URI: its prompt is asked for.
  const showModelText = async (resource?: vscode.Uri | string): Promise<void> => {
    const given = typeof resource === 'string' ? vscode.Uri.parse(resource) : resource;
    const shown = given ?? vscode.window.activeTextEditor?.document.uri;
    const target = shown?.scheme === PREVIEW_SCHEME ? promptUriOf(shown) : shown;
    if (target === undefined) {
      void vscode.window.showInformationMessage('Open a prompt to see the text the model receives for it.');
      return;
    }
    try {
      const result = asPreviewResult(await server.executeCommand(SERVER_COMMANDS.modelText, [target.toString()]), SERVER_COMMANDS.modelText);
      const uri = vscode.Uri.parse(result.uri);
      previews.update(uri, result.text);
      server.previewShown(uri);
      await previews.show(uri);
    } catch (error) {
      void vscode.window.showErrorMessage(`Could not show the model-facing text: ${errorText(error)}`);
    }
  };

  context.subscriptions.push(
    PreviewDocuments.keepLanguage(),
    output,
    previews,
    previews.register(),
    transcripts,
    transcripts.register(),
    new MentionLinks(async (sessionUri) => asTranscriptResult(await server.executeCommand(SERVER_COMMANDS.transcript, [sessionUri])).uri).register(),
    server,
    server.onDidChangeContent(contentChanged),
    new PreviewFollower(server, previews),
    vscode.workspace.onDidChangeTextDocument((event) => {
      if (event.document.uri.scheme !== PREVIEW_SCHEME && event.contentChanges.length > 0 && server.selects(event.document)) {
        dropSummary();
      }
    }),
    vscode.workspace.onDidChangeConfiguration(dropSummary),
    { dispose: dropSummary },
    vscode.workspace.onDidCloseTextDocument((document) => {
      if (document.uri.scheme === TRANSCRIPT_SCHEME) {
        transcripts.forget(document.uri);
      }
    }),
    status,
    new MentionChips(server),
    server.onDidChangeState(updateContext),
    vscode.window.onDidChangeActiveTextEditor(updateContext),
    server.onDidChangeState((state) => {
      if (state === 'running') {
        transcripts.refresh();
      }
    }),
    server.onDidStart(() => {
      startedAt = Date.now();
      setTimeout(reopenCompletion, REOPEN_CHECK_MS);
    }),
    vscode.window.onDidChangeTextEditorSelection((event) => {
      if (Date.now() - startedAt < STARTUP_RETRIGGER_MS && event.textEditor === vscode.window.activeTextEditor) {
        // After the completion that this keystroke asks for has had time to answer.
        setTimeout(reopenCompletion, REOPEN_CHECK_MS);
      }
    }),
    vscode.commands.registerCommand(CLIENT_COMMANDS.previewContext, previewContext),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showModelText, showModelText),
    vscode.commands.registerCommand(CLIENT_COMMANDS.selectTarget, () => selectTargetSession(server, targets)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.insertMention, () => insertSessionMention(server)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.goToSession, () => goToSession(server)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restartServer, async () => {
      output.info('restart requested');
      await server.restart();
    }),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.sendToDsh, (resource?: vscode.Uri | string) => sender.send(resource)),
  );
  updateContext();
  reopenCompletion(); // an `@` typed before the extension was active gets "Starting dsh…"
  await server.start();
  updateContext();
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
