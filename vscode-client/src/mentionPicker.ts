// "Insert session mention": a quick pick over all the sessions the prompt may mention, searched
// by the server as the user types (title, id or folder, in dsh's rank order), that inserts the
// chosen session's canonical mention at the cursor. The server makes the edit (its
// `insertMention` command sends `workspace/applyEdit`), so the mention is exactly the one `@`
// completion would insert. The picker counts the sessions the prompt references against
// `maxReferences` (mentionLimit.ts); a pick that would be one too many asks which referenced
// session it replaces, and the server turns that session's mentions into the pick's.

import * as vscode from 'vscode';

import { errorText, plural } from './format';
import { isReferenced, mentionLimit, MentionLimit, pickerPlaceholder, pickerTitle, replaceQuestion, wouldExceed } from './mentionLimit';
import { asDocumentSummary, asInsertMentionResult, SERVER_COMMANDS } from './protocol';
import { ServerController } from './serverController';
import { pickSession } from './sessionPicker';

/** The prompt's referenced sessions as the server counts them now; undefined if it cannot say. */
async function currentLimit(controller: ServerController, documentUri: string): Promise<MentionLimit | undefined> {
  try {
    return mentionLimit(asDocumentSummary(await controller.executeCommand(SERVER_COMMANDS.documentSummary, [documentUri])));
  } catch (error) {
    controller.output.warn(`insert mention: the prompt's summary: ${errorText(error)}`);
    return undefined;
  }
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
  const limit = await currentLimit(controller, documentUri);
  const picked = await pickSession(controller, {
    title: pickerTitle(limit),
    placeholder: pickerPlaceholder(limit),
    documentUri,
    mark: (candidate) => (isReferenced(limit, candidate.sessionId) ? '$(check) mentioned' : undefined),
  });
  if (picked === undefined || !('candidate' in picked)) {
    return;
  }
  const candidate = picked.candidate;
  // Where the cursor is now: the picker does not move it, but the user may have switched back.
  const target = vscode.window.activeTextEditor?.document === document ? vscode.window.activeTextEditor : editor;
  const position = target.selection.active;
  // Counted again: the prompt may have changed while the picker was open.
  const now = await currentLimit(controller, documentUri);
  let replace: string | undefined;
  if (now !== undefined && wouldExceed(now, candidate.sessionId)) {
    const question = replaceQuestion(now, candidate.label);
    const choice = await vscode.window.showQuickPick(question.choices, { title: question.title, placeHolder: 'Replace which session?' });
    if (choice?.replace === undefined) {
      return;
    }
    replace = choice.replace;
  }
  try {
    const result = asInsertMentionResult(
      await controller.executeCommand(SERVER_COMMANDS.insertMention, [
        {
          documentUri,
          position: { line: position.line, character: position.character },
          sessionId: candidate.sessionId,
          ...(replace === undefined ? {} : { replace }),
        },
      ]),
    );
    if (!result.applied) {
      void vscode.window.showWarningMessage(
        `The mention of ${candidate.label} was not inserted: the prompt changed or is read-only. Try again.`,
      );
      return;
    }
    if (replace !== undefined) {
      const replaced = now?.referenced.find((session) => session.sessionId === replace)?.label ?? replace;
      vscode.window.setStatusBarMessage(`DSH: “${replaced}” replaced by “${candidate.label}” (${plural(result.replaced ?? 0, 'mention')})`, 6000);
      return;
    }
    placeCursorAfter(document, position, result.mention);
  } catch (error) {
    void vscode.window.showErrorMessage(`Could not insert the mention: ${errorText(error)}`);
  }
}

/**
 * Leaves the cursor after an inserted mention, as accepting a completion does, where the edit left
 * it: before the mention, or at its end (a selection the command was run on grows over it; it
 * collapses, as the cursor does). Only there: the reply comes after the edit, and a user who typed
 * on in between (their cursor already past the mention) must not be sent back into what they typed.
 */
function placeCursorAfter(document: vscode.TextDocument, position: vscode.Position, mention: string): void {
  const editor = vscode.window.activeTextEditor;
  const end = position.translate(0, mention.length);
  const inserted = document.getText(new vscode.Range(position, end));
  const active = editor?.selection.active;
  if (inserted === mention && editor?.document === document && (active?.isEqual(position) || active?.isEqual(end))) {
    editor.selection = new vscode.Selection(end, end);
  }
}
