// Every problem a user can fix is said once (until the user restarts the server), with the
// buttons that act on it; the output keeps each occurrence.

import * as vscode from 'vscode';

import { CLIENT_COMMANDS } from './protocol';
import { SECTION } from './settings';

export type NoticeAction = 'Open Settings' | 'Show Output' | 'Restart Server';

export class Notices {
  private readonly notified = new Set<string>();

  constructor(private readonly output: vscode.LogOutputChannel) {}

  /** Repeats notifications that still apply (the user's restart). */
  reset(): void {
    this.notified.clear();
  }

  /** Shows a problem once per `key`, with buttons that act on it. */
  async once(key: string, severity: 'error' | 'warning', message: string, actions: NoticeAction[]): Promise<string | undefined> {
    (severity === 'error' ? this.output.error : this.output.warn).call(this.output, message);
    if (this.notified.has(key)) {
      return undefined;
    }
    this.notified.add(key);
    const show = severity === 'error' ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    const choice = await show(message, ...actions);
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.interpreter`);
    } else if (choice === 'Show Output') {
      this.output.show(true);
    } else if (choice === 'Restart Server') {
      await vscode.commands.executeCommand(CLIENT_COMMANDS.restartServer);
    }
    return choice;
  }
}
