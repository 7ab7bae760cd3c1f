// Entry point: wires the server's controller, the virtual documents, the status bar and the
// commands. Each piece lives in its own module; this file only connects them.

// First, so that the bundle runs them before any other module: the start's clock, then the
// server spawned while VS Code prepares the extension's context.
import { loadedAt } from './startClock';
import { earlyServer } from './earlyStart';

import * as vscode from 'vscode';

import { goToSession } from './goToSession';
import { MentionChips } from './mentionChips';
import { BrokenMentionLinks, MentionLinks } from './mentionLinks';
import { insertSessionMention } from './mentionPicker';
import { PreviewDocuments } from './preview';
import { PreviewCommands } from './previewCommands';
import { PreviewFollower } from './previewFollower';
import { asTranscriptResult, CLIENT_COMMANDS, PREVIEW_SCHEME, SERVER_COMMANDS, TRANSCRIPT_SCHEME } from './protocol';
import { Sender } from './send';
import { CLIENT_NAME } from './server';
import { ServerController } from './serverController';
import { CompletionReopener } from './startupCompletion';
import { MentionStatus } from './statusBar';
import { selectTargetSession, TargetStore } from './targetPicker';
import { TranscriptDocuments } from './transcript';

// Made as the extension's code loads, not in `activate`: VS Code prepares the extension's context
// before it calls `activate` (up to a second or more on a busy machine, docs/benchmarks.md), and the
// client starts on the early server in that time (`ServerController.startEarly`). What needs the
// context (the interpreter's kept probe, the target store) and everything a user sees waits for
// `activate`.
const output = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
// The providers ask the controller, made just below (it hands the server's requests to them).
const previews = new PreviewDocuments(async (uri): Promise<string | undefined> => controller.textDocumentContent(uri));
const transcripts = new TranscriptDocuments(async (uri, token): Promise<string | undefined> => controller.transcriptText(uri, token));
const providers = new Map<string, vscode.TextDocumentContentProvider>([
  [PREVIEW_SCHEME, previews],
  [TRANSCRIPT_SCHEME, transcripts],
]);
const controller: ServerController = new ServerController(output, (uri) => previews.show(uri), providers, { loadedAt, early: earlyServer });
// Before the client starts: its start may come before `activate`, and an `@` typed by then is asked again.
const reopener = new CompletionReopener(controller);
controller.startEarly();

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output.info(`activate called ${Date.now() - loadedAt} ms after activation (the extension's code began to run at ${new Date(loadedAt).toISOString()})`);
  controller.attach(context);
  const targets = new TargetStore(context.workspaceState);
  const status = new MentionStatus(controller, targets);
  const sender = new Sender(controller);
  const updateContext = (): void => setContextKeys(controller);

  context.subscriptions.push(
    PreviewDocuments.keepLanguage(),
    output,
    previews,
    previews.register(),
    transcripts,
    transcripts.register(),
    BrokenMentionLinks.register(controller),
    new MentionLinks(async (sessionUri) => asTranscriptResult(await controller.executeCommand(SERVER_COMMANDS.transcript, [sessionUri])).uri).register(),
    controller,
    ...transcripts.follow(controller),
    new PreviewFollower(controller, previews),
    ...new PreviewCommands(controller, previews).register(),
    status,
    new MentionChips(controller),
    controller.onDidChangeState(updateContext),
    vscode.window.onDidChangeActiveTextEditor(updateContext),
    reopener,
    vscode.commands.registerCommand(CLIENT_COMMANDS.selectTarget, () => selectTargetSession(controller, targets)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.insertMention, () => insertSessionMention(controller)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.goToSession, () => goToSession(controller)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restartServer, async () => {
      output.info('restart requested');
      await controller.restart();
    }),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.sendToDsh, (resource?: vscode.Uri | string) => sender.send(resource)),
  );
  updateContext();
  reopener.started(); // an `@` typed before the editor was known here gets "Starting dsh…"
  await controller.start();
  updateContext();
}

/** The context keys package.json's menus and keybindings read, for the active editor. */
function setContextKeys(controller: ServerController): void {
  const document = vscode.window.activeTextEditor?.document;
  const prompt = document !== undefined && controller.selects(document);
  void vscode.commands.executeCommand('setContext', 'dshSessionReference.documentSelected', prompt);
  // Where Ctrl+T is "Go to session" (package.json's keybinding): a prompt or a transcript.
  void vscode.commands.executeCommand('setContext', 'dshSessionReference.sessionsAtHand', prompt || document?.uri.scheme === TRANSCRIPT_SCHEME);
}

export async function deactivate(): Promise<void> {
  await controller.stop();
}
