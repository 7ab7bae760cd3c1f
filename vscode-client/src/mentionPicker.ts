// "Insert session mention": a quick pick over all the sessions the prompt may mention, searched
// by the server as the user types (title, id or folder, in dsh's rank order), that inserts the
// chosen session's canonical mention at the cursor. The server makes the edit (its
// `insertMention` command sends `workspace/applyEdit`), so the mention is exactly the one `@`
// completion would insert.

import * as vscode from 'vscode';

import { errorText, formatCandidate } from './format';
import { asCandidates, asInsertMentionResult, Candidate, SERVER_COMMANDS } from './protocol';
import { LatestSearch } from './search';
import { ServerController } from './serverController';
import { SEARCH_DELAY_MS } from './targetPicker';

interface SessionItem extends vscode.QuickPickItem {
  readonly candidate: Candidate;
}


function pickSession(controller: ServerController, documentUri: string): Promise<Candidate | undefined> {
  const pick = vscode.window.createQuickPick<SessionItem>();
  pick.title = 'DSH: Insert session mention';
  pick.placeholder = 'Type a title, id or folder: the session to mention at the cursor';
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  const search = new LatestSearch<Candidate[], vscode.CancellationToken>(
    {
      run: async (query, token) => asCandidates(await controller.executeCommand(SERVER_COMMANDS.candidates, [{ documentUri, query }], token)),
      show: (candidates) => {
        const now = new Date();
        pick.items = candidates.map((candidate) => {
          const row = formatCandidate(candidate, now);
          // Shown whatever VS Code's own filter thinks: the server has matched it already.
          return { label: row.label, description: row.description, detail: row.detail || undefined, candidate, alwaysShow: true };
        });
      },
      fail: (error) => {
        pick.hide();
        void vscode.window.showErrorMessage(`Could not list sessions: ${errorText(error)}`);
      },
      busy: (busy) => {
        pick.busy = busy;
      },
    },
    () => new vscode.CancellationTokenSource(),
    SEARCH_DELAY_MS,
  );
  return new Promise<Candidate | undefined>((resolve) => {
    const disposables: vscode.Disposable[] = [];
    const finish = (candidate: Candidate | undefined): void => {
      resolve(candidate);
      search.dispose();
      for (const disposable of disposables) {
        disposable.dispose();
      }
      pick.dispose();
    };
    disposables.push(
      pick.onDidChangeValue((value) => search.schedule(value.trim())),
      pick.onDidAccept(() => {
        const chosen = pick.selectedItems[0] ?? pick.activeItems[0];
        if (chosen !== undefined) {
          finish(chosen.candidate);
        }
      }),
      pick.onDidHide(() => finish(undefined)),
    );
    pick.show();
    void search.now('');
  });
}

/** The command: pick a session, then let the server insert its mention at the cursor. */
export async function insertSessionMention(controller: ServerController): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || !controller.selects(editor.document)) {
    void vscode.window.showInformationMessage('Open a prompt (Markdown, plain text or DSH Prompt) and place the cursor where the mention goes.');
    return;
  }
  const document = editor.document;
  const documentUri = document.uri.toString();
  const candidate = await pickSession(controller, documentUri);
  if (candidate === undefined) {
    return;
  }
  // Where the cursor is now: the picker does not move it, but the user may have switched back.
  const target = vscode.window.activeTextEditor?.document === document ? vscode.window.activeTextEditor : editor;
  const position = target.selection.active;
  try {
    const result = asInsertMentionResult(
      await controller.executeCommand(SERVER_COMMANDS.insertMention, [
        { documentUri, position: { line: position.line, character: position.character }, sessionId: candidate.sessionId },
      ]),
    );
    if (!result.applied) {
      void vscode.window.showWarningMessage(
        `The mention of ${candidate.label} was not inserted: the prompt changed or is read-only. Try again.`,
      );
      return;
    }
    // Leave the cursor after the mention, as accepting a completion does.
    const inserted = document.getText(new vscode.Range(position, position.translate(0, result.mention.length)));
    if (inserted === result.mention && vscode.window.activeTextEditor?.document === document) {
      const end = position.translate(0, result.mention.length);
      vscode.window.activeTextEditor.selection = new vscode.Selection(end, end);
    }
  } catch (error) {
    void vscode.window.showErrorMessage(`Could not insert the mention: ${errorText(error)}`);
  }
}
