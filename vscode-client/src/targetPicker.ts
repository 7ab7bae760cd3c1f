// "Select target session": the session a prompt is written for (it is excluded from the
// candidates and may not be referenced). The choice is the `targetSessionId` setting of the
// workspace, so it is visible in the Settings editor and reaches the server through the normal
// configuration push; the label is remembered beside it only for display.

import * as vscode from 'vscode';

import { formatCandidate } from './format';
import { asCandidates, Candidate, SERVER_COMMANDS } from './protocol';
import { ServerController } from './serverController';
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

interface TargetItem extends vscode.QuickPickItem {
  readonly candidate?: Candidate;
  readonly clear?: true;
}

export async function selectTargetSession(controller: ServerController, targets: TargetStore): Promise<void> {
  const pick = vscode.window.createQuickPick<TargetItem>();
  pick.title = 'DSH: Select target session';
  pick.placeholder = 'The session this prompt is written for; it is never offered as a mention';
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  pick.busy = true;
  pick.show();
  const current = targets.current();
  const fixed: TargetItem[] = [
    {
      label: '$(circle-slash) No target',
      description: current === undefined ? 'current' : undefined,
      detail: 'Use $DSH_SESSION_ID when it is set',
      clear: true,
    },
  ];
  if (current !== undefined) {
    const titled = current.label !== undefined && current.label !== current.id;
    fixed.unshift({ label: `$(check) ${titled ? current.label : current.id}`, description: 'current target', detail: titled ? current.id : undefined });
  }
  pick.items = fixed;
  try {
    const documentUri = vscode.window.activeTextEditor?.document.uri.toString();
    const candidates = asCandidates(await controller.executeCommand(SERVER_COMMANDS.candidates, [documentUri ? { documentUri } : {}]));
    const now = new Date();
    pick.items = [
      ...fixed,
      { label: 'Sessions', kind: vscode.QuickPickItemKind.Separator },
      ...candidates.map((candidate) => {
        const row = formatCandidate(candidate, now);
        return { label: row.label, description: row.description, detail: row.detail || undefined, candidate };
      }),
    ];
  } catch (error) {
    pick.hide();
    void vscode.window.showErrorMessage(`Could not list sessions: ${error instanceof Error ? error.message : String(error)}`);
    return;
  } finally {
    pick.busy = false;
  }
  const chosen = await new Promise<TargetItem | undefined>((resolve) => {
    pick.onDidAccept(() => resolve(pick.selectedItems[0]));
    pick.onDidHide(() => resolve(undefined));
  });
  pick.dispose();
  if (chosen === undefined || (chosen.candidate === undefined && chosen.clear !== true)) {
    return;
  }
  await targets.set(chosen.candidate);
  vscode.window.setStatusBarMessage(
    chosen.candidate === undefined ? 'DSH: no target session' : `DSH: target session is now ${chosen.candidate.label}`,
    4000,
  );
}
