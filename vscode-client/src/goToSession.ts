// "DSH: Go to session" (Ctrl+T while a prompt or a transcript is the active editor): finds a
// session by title, project folder or id prefix, as `@` does and in dsh's order, and opens its
// transcript.
//
// VS Code's own Go to Symbol in Workspace cannot carry sessions (seen in 1.139.1's
// symbolsQuickAccess): it keeps only the symbols whose *name* its fuzzy filter matches (a folder
// or id query lists nothing; the words after the first are matched against the location's path),
// sorts the rest by its own score, and writes each location's path beside the name, which for a
// transcript is the tab name, read as a file. So the server's sessions are left out of that list
// (server.ts's middleware) and searched here. The picker's last row hands what was typed
// to Go to Symbol in Workspace, for the other symbols Ctrl+T finds elsewhere.

import * as vscode from 'vscode';

import { otherSymbolsHeading } from './format';
import { ServerController } from './serverController';
import { pickSession } from './sessionPicker';

const OTHER_SYMBOLS = 'symbols';

export async function goToSession(controller: ServerController): Promise<void> {
  const picked = await pickSession(controller, {
    title: 'DSH: Go to session',
    placeholder: 'Type a title, id or folder: Enter opens the session’s transcript',
    trailing: {
      heading: otherSymbolsHeading,
      rows: [{ label: '$(symbol-misc) Go to Symbol in Workspace…', description: 'search the other symbols for what you typed', choice: OTHER_SYMBOLS }],
    },
  });
  if (picked === undefined) {
    return;
  }
  if ('choice' in picked) {
    await vscode.commands.executeCommand('workbench.action.quickOpen', `#${picked.query}`);
    return;
  }
  const transcript = picked.candidate.transcript;
  if (transcript === undefined) {
    void vscode.window.showErrorMessage(`Could not open the transcript of ${picked.candidate.label}: the server gave no transcript URI for it.`);
    return;
  }
  await vscode.window.showTextDocument(vscode.Uri.parse(transcript));
}
