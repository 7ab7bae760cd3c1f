// "Insert session mention": a quick pick over all the sessions the prompt may mention, searched
// by the server as the user types (title, id or folder, in dsh's rank order), that inserts the
// chosen session's canonical mention at the cursor. The server makes the edit (its
// `insertMention` command sends `workspace/applyEdit`), so the mention is exactly the one `@`
// completion would insert.

import * as vscode from 'vscode';

import { errorText } from './format';
import { asInsertMentionResult, SERVER_COMMANDS } from './protocol';
import { ServerController } from './serverController';
import { pickSession } from './sessionPicker';

/** The command: pick a session, then let the server insert its mention at the cursor. */
export async function insertSessionMention(controller: ServerController): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || !controller.selects(editor.document)) {
    void vscode.window.showInformationMessage('Open a prompt (Markdown, plain text or DSH Prompt) and place the cursor where the mention goes.');
    return;
  }
  const document = editor.document;
  const documentUri = document.uri.toString();
  const picked = await pickSession(controller, {
    title: 'DSH: Insert session mention',
    placeholder: 'Type a title, id or folder: the session to mention at the cursor',
    documentUri,
  });
  if (picked === undefined || !('candidate' in picked)) {
    return;
  }
  const candidate = picked.candidate;
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
