// Every open preview is a live view of its prompt. A preview's URI names its prompt (its query),
// so what is followed is found from the documents VS Code has open, never from a list kept here:
// a preview the window restores after a reload (read before the server ran, or after) follows its
// prompt exactly as one just opened does. Each of these prepares the open previews of a prompt
// again, after edits settle: an edit, the prompt opening or closing, a file deleted or renamed,
// a setting, the server starting, and the server saying a session log under it changed. A prompt
// that is no longer open is prepared from the file as saved, under a notice saying so; one that is
// gone leaves its last text under a notice saying that. While the server is not running each
// preview says it is out of date.

import * as vscode from 'vscode';

import { errorText, promptGoneNotice } from './format';
import { asPreviewResult, changedContent, isModelTextPreview, isRequestCancelled, PREVIEW_SCHEME, promptOfPreview, SERVER_COMMANDS } from './protocol';
import { PreviewDocuments, promptUriOf } from './preview';
import { ServerController } from './serverController';
import { SECTION } from './settings';

/** Quiet time after the last edit before an open preview is prepared again. */
const PREVIEW_REFRESH_MS = 400;
/** A preview prepared this recently is not prepared again only because its document opened. */
const JUST_PREPARED_MS = 2000;

function nameOf(uri: vscode.Uri): string {
  return uri.path.split('/').pop() || uri.toString();
}

/**
 * Whether the prompt is open as the user sees it: in a tab, or with unsaved edits. VS Code keeps
 * a document open for a while after its last tab closed; until then the server still has it, and
 * it reads as the file does.
 */
function isOpen(key: string): boolean {
  const document = vscode.workspace.textDocuments.find((candidate) => candidate.uri.toString() === key);
  if (document === undefined) {
    return false;
  }
  return (
    document.isDirty ||
    vscode.window.tabGroups.all.some((group) => group.tabs.some((tab) => tab.input instanceof vscode.TabInputText && tab.input.uri.toString() === key))
  );
}

export class PreviewFollower implements vscode.Disposable {
  /** Prompts (URI strings) whose previews are to be prepared again; `all` for every one. */
  private readonly wanted = new Set<string>();
  private all = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** A watcher on each followed prompt file: deleted, renamed or rewritten outside the editor. */
  private readonly watchers = new Map<string, vscode.Disposable>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly controller: ServerController,
    private readonly previews: PreviewDocuments,
  ) {
    const promptEvent = (document: vscode.TextDocument): void => {
      if (document.uri.scheme !== PREVIEW_SCHEME) {
        this.schedule(document.uri.toString());
      }
    };
    this.disposables.push(
      vscode.workspace.onDidChangeTextDocument((event) => promptEvent(event.document)),
      vscode.workspace.onDidOpenTextDocument((document) => {
        if (document.uri.scheme !== PREVIEW_SCHEME) {
          promptEvent(document); // a closed prompt opened again: its previews follow the editor again
          return;
        }
        const prepared = previews.preparedAt(document.uri);
        const prompt = promptUriOf(document.uri);
        if (prompt !== undefined && (prepared === undefined || Date.now() - prepared.getTime() > JUST_PREPARED_MS)) {
          this.schedule(prompt.toString()); // restored by VS Code, or read again from an old text
        }
      }),
      vscode.workspace.onDidCloseTextDocument((document) => {
        if (document.uri.scheme === PREVIEW_SCHEME) {
          previews.forget(document.uri);
        } else {
          promptEvent(document);
        }
      }),
      // A closed tab's document may stay open for a while: the tab is what the user closed.
      vscode.window.tabGroups.onDidChangeTabs((event) => {
        for (const tab of [...event.opened, ...event.closed]) {
          if (tab.input instanceof vscode.TabInputText && tab.input.uri.scheme !== PREVIEW_SCHEME) {
            this.schedule(tab.input.uri.toString());
          }
        }
      }),
      vscode.workspace.onDidDeleteFiles(() => this.schedule()),
      vscode.workspace.onDidRenameFiles(() => this.schedule()),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration(SECTION)) {
          this.schedule();
        }
      }),
      controller.onDidChangeContent((params) => {
        for (const preview of changedContent(params).previews) {
          const prompt = promptOfPreview(preview);
          if (prompt !== undefined) {
            this.schedule(vscode.Uri.parse(prompt).toString());
          }
        }
      }),
      controller.onDidChangeState((state) => {
        if (state === 'running') {
          this.schedule();
        } else {
          for (const preview of this.openPreviews()) {
            previews.markStale(preview, 'the DSH language server is not running');
          }
        }
      }),
      { dispose: () => clearTimeout(this.timer) },
    );
    if (controller.state === 'running') {
      // The server may have started before this existed (ServerController.startEarly, before
      // `activate`): the open previews are prepared as if it started now.
      this.schedule();
    }
  }

  /** Prepare the open previews of `prompt` again once edits settle (every open preview without one). */
  schedule(prompt?: string): void {
    if (prompt === undefined) {
      this.all = true;
    } else {
      this.wanted.add(prompt);
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const all = this.all;
      const wanted = new Set(this.wanted);
      this.all = false;
      this.wanted.clear();
      this.queue = this.queue.then(() => this.refresh(all, wanted));
    }, PREVIEW_REFRESH_MS);
  }

  private openPreviews(): vscode.Uri[] {
    return vscode.workspace.textDocuments.filter((document) => document.uri.scheme === PREVIEW_SCHEME).map((document) => document.uri);
  }

  private async refresh(all: boolean, wanted: ReadonlySet<string>): Promise<void> {
    const open = this.openPreviews();
    const openKeys = new Set(open.map((uri) => uri.toString()));
    // A text held for a preview not open now would be read again as it is: drop it, so the next
    // read asks the server for the prompt as it is then.
    for (const uri of this.previews.known()) {
      const prompt = promptUriOf(uri);
      if (!openKeys.has(uri.toString()) && prompt !== undefined && (all || wanted.has(prompt.toString()))) {
        this.previews.forget(uri);
      }
    }
    for (const preview of open) {
      const prompt = promptUriOf(preview);
      if (prompt !== undefined && (all || wanted.has(prompt.toString()))) {
        await this.prepare(preview, prompt);
      }
    }
    this.watch(open);
  }

  private async prepare(preview: vscode.Uri, prompt: vscode.Uri): Promise<void> {
    if (this.controller.state !== 'running') {
      return; // prepared again when it runs; meanwhile the preview says it is out of date
    }
    const key = prompt.toString();
    const open = isOpen(key);
    if (!open && !(await this.exists(prompt))) {
      this.previews.markGone(preview, nameOf(prompt));
      return;
    }
    const command = isModelTextPreview(preview.toString()) ? SERVER_COMMANDS.modelText : SERVER_COMMANDS.preview;
    try {
      this.controller.previewShown(preview); // the server's request to show it again is not needed
      const result = asPreviewResult(await this.controller.executeCommand(command, [key]), command);
      this.previews.update(preview, result.text, open ? '' : promptGoneNotice(nameOf(prompt), true, new Date()));
    } catch (error) {
      if (isRequestCancelled(error)) {
        return; // a stopping server dropped it; prepared again once the server runs
      }
      this.controller.output.info(`preparing the preview ${preview.toString()} again: ${errorText(error)}`);
      this.previews.markStale(preview, `preparing it again failed (${errorText(error)})`);
    }
  }

  private async exists(uri: vscode.Uri): Promise<boolean> {
    if (uri.scheme === 'untitled') {
      return false; // an untitled prompt that is not open is gone
    }
    try {
      await vscode.workspace.fs.stat(uri);
      return true;
    } catch {
      return false;
    }
  }

  /** Watches the files of the prompts the open previews follow (and only those). */
  private watch(open: readonly vscode.Uri[]): void {
    const files = new Map<string, vscode.Uri>();
    for (const preview of open) {
      const prompt = promptUriOf(preview);
      if (prompt?.scheme === 'file') {
        files.set(prompt.toString(), prompt);
      }
    }
    for (const [key, watcher] of this.watchers) {
      if (!files.has(key)) {
        watcher.dispose();
        this.watchers.delete(key);
      }
    }
    for (const [key, prompt] of files) {
      if (!this.watchers.has(key)) {
        const folder = vscode.Uri.joinPath(prompt, '..');
        const watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(folder, nameOf(prompt)));
        const changed = (): void => this.schedule(key);
        watcher.onDidCreate(changed);
        watcher.onDidDelete(changed);
        watcher.onDidChange(changed);
        this.watchers.set(key, watcher);
      }
    }
  }

  dispose(): void {
    for (const disposable of [...this.disposables, ...this.watchers.values()]) {
      disposable.dispose();
    }
    this.watchers.clear();
  }
}
