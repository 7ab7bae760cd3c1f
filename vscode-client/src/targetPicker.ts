// "Select target session": the session a prompt is written for (it is excluded from the
// candidates and may not be referenced). The choice is the `targetSessionId` setting of the
// workspace, so it is visible in the Settings editor and reaches the server through the normal
// configuration push; the label is remembered beside it only for display.

import * as vscode from 'vscode';

import { Candidate } from './protocol';
import { ServerController } from './serverController';
import { FixedRow, pickSession } from './sessionPicker';
import { SECTION } from './settings';

const LABELS_KEY = 'dshSessionReference.targetLabels';

export class TargetStore {
  constructor(private readonly state: vscode.Memento) {}

  current(): { id: string; label?: string } | undefined {
    const id = vscode.workspace.getConfiguration(SECTION).get<string>('targetSessionId') ?? '';
    if (id === '') {
      return undefined;
    }
    const label = this.state.get<Record<string, string>>(LABELS_KEY, {})[id];
    return label === undefined ? { id } : { id, label };
  }

  /** Keeps a session's title for display; ids alone are not readable. */
  async remember(sessionId: string, label: string): Promise<void> {
    const labels = this.state.get<Record<string, string>>(LABELS_KEY, {});
    if (labels[sessionId] !== label && label !== sessionId) {
      await this.state.update(LABELS_KEY, { ...labels, [sessionId]: label });
    }
  }

  async set(candidate: Candidate | undefined): Promise<void> {
    if (candidate !== undefined) {
      await this.remember(candidate.sessionId, candidate.label);
    }
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration(SECTION).update('targetSessionId', candidate?.sessionId ?? '', target);
  }
}

const NO_TARGET = 'none';
const CURRENT = 'current';

export async function selectTargetSession(controller: ServerController, targets: TargetStore): Promise<void> {
  const current = targets.current();
  const fixed: FixedRow[] = [
    {
      label: '$(circle-slash) No target',
      description: current === undefined ? 'current' : undefined,
      detail: 'Use $DSH_SESSION_ID when it is set',
      choice: NO_TARGET,
    },
  ];
  if (current !== undefined) {
    const titled = current.label !== undefined && current.label !== current.id;
    fixed.unshift({ label: `$(check) ${titled ? current.label : current.id}`, description: 'current target', detail: titled ? current.id : undefined, choice: CURRENT });
  }
  const picked = await pickSession(controller, {
    title: 'DSH: Select target session',
    placeholder: 'Type a title, id or folder: the session this prompt is written for',
    documentUri: vscode.window.activeTextEditor?.document.uri.toString(),
    fixed,
  });
  if (picked === undefined || ('choice' in picked && picked.choice === CURRENT)) {
    return;
  }
  const candidate = 'candidate' in picked ? picked.candidate : undefined;
  await targets.set(candidate);
  vscode.window.setStatusBarMessage(candidate === undefined ? 'DSH: no target session' : `DSH: target session is now ${candidate.label}`, 4000);
}
