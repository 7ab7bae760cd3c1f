// "DSH: Send to dsh": the prompt sent to a running dsh web by the server's `dshSessionReference.send`
// (which checks it as the diagnostics do and posts it as dsh's composer would), with the address
// from the user's own settings. The answer says where it went and what was sent; a refusal says
// why and offers the next step.

import * as vscode from 'vscode';

import { errorText } from './format';
import { CLIENT_COMMANDS, PREVIEW_SCHEME, SERVER_COMMANDS } from './protocol';
import { asSendResult, clientTimeZone, NEXT_STEP, notSentReason, userWebUrl } from './sendResult';
import { ServerController } from './serverController';
import { SECTION } from './settings';

export const WEB_URL_SETTING = 'dshWebUrl';

export class Sender {
  /** Prompts being sent: a second Send of the same prompt meanwhile would queue it twice in dsh. */
  private readonly sending = new Set<string>();

  constructor(private readonly controller: ServerController) {}

  /** Run with no argument (the active prompt, or the prompt of the preview in front) or a Uri. */
  async send(resource?: vscode.Uri | string): Promise<void> {
    const active = vscode.window.activeTextEditor?.document;
    const given = typeof resource === 'string' ? vscode.Uri.parse(resource) : resource;
    const uri = given ?? (active?.uri.scheme === PREVIEW_SCHEME ? vscode.Uri.parse(active.uri.query) : active?.uri);
    const document = uri === undefined ? undefined : vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri.toString());
    if (uri === undefined || (document !== undefined && !this.controller.selects(document))) {
      void vscode.window.showInformationMessage('Open a prompt (Markdown, plain text or DSH Prompt) to send it to dsh.');
      return;
    }
    const key = uri.toString();
    if (this.sending.has(key)) {
      vscode.window.setStatusBarMessage('DSH: this prompt is being sent already', 4000);
      return;
    }
    const url = userWebUrl(vscode.workspace.getConfiguration(SECTION).inspect(WEB_URL_SETTING));
    const options = { notify: false, clientTimeZone: clientTimeZone(), ...(url === undefined ? {} : { dshWebUrl: url }) };
    this.sending.add(key);
    let answer: unknown;
    try {
      answer = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'DSH: sending to dsh…' },
        () => this.controller.executeCommand(SERVER_COMMANDS.send, [key, options]),
      );
    } catch (error) {
      await this.refused(error);
      return;
    } finally {
      this.sending.delete(key);
    }
    try {
      void vscode.window.showInformationMessage(asSendResult(answer).message);
    } catch (error) {
      void vscode.window.showErrorMessage(errorText(error));
    }
  }

  private async refused(error: unknown): Promise<void> {
    const reason = notSentReason(error);
    const next = reason === undefined ? undefined : NEXT_STEP[reason];
    const text = reason === undefined ? `Could not send to dsh: ${errorText(error)}` : errorText(error);
    const choice = await (next === undefined ? vscode.window.showErrorMessage(text) : vscode.window.showErrorMessage(text, next));
    if (choice === undefined) {
      return;
    }
    if (reason === 'errors') {
      await vscode.commands.executeCommand('workbench.actions.view.problems');
    } else if (reason === 'address') {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.${WEB_URL_SETTING}`);
    } else if (reason === 'no-folder') {
      await vscode.commands.executeCommand(CLIENT_COMMANDS.selectTarget);
    }
  }
}
