// "Select target session": the session a prompt is written for (it is excluded from the
// candidates and may not be referenced). The choice is the `targetSessionId` setting of the
// workspace, so it is visible in the Settings editor and reaches the server through the normal
// configuration push; the label is remembered beside it only for display.

import * as vscode from 'vscode';

import { errorText, formatCandidate } from './format';
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

/** Milliseconds of quiet typing before the picker asks the server again. */
export const SEARCH_DELAY_MS = 120;

export async function selectTargetSession(controller: ServerController, targets: TargetStore): Promise<void> {
  const pick = vscode.window.createQuickPick<TargetItem>();
  pick.title = 'DSH: Select target session';
  pick.placeholder = 'Type a title, id or folder: the session this prompt is written for';
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
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
  const documentUri = vscode.window.activeTextEditor?.document.uri.toString();
  // Every keystroke asks the server (the candidates list is capped, so filtering the first
  // rows here would never find an older session); a newer answer wins over a slower older one.
  let asked = 0;
  let failed = false;
  const search = async (query: string): Promise<void> => {
    const mine = ++asked;
    pick.busy = true;
    try {
      const options = documentUri === undefined ? { query } : { documentUri, query };
      const candidates = asCandidates(await controller.executeCommand(SERVER_COMMANDS.candidates, [options]));
      if (mine !== asked) {
        return;
      }
      const now = new Date();
      pick.items = [
        ...fixed,
        { label: query === '' ? 'Sessions' : `Sessions matching “${query}”`, kind: vscode.QuickPickItemKind.Separator },
        ...candidates.map((candidate) => {
          const row = formatCandidate(candidate, now);
          // Shown whatever VS Code's own filter thinks: the server has matched it already.
          return { label: row.label, description: row.description, detail: row.detail || undefined, candidate, alwaysShow: true };
        }),
      ];
    } catch (error) {
      failed = true;
      pick.hide();
      void vscode.window.showErrorMessage(`Could not list sessions: ${errorText(error)}`);
    } finally {
      if (mine === asked) {
        pick.busy = false;
      }
    }
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const typing = pick.onDidChangeValue((value) => {
    clearTimeout(timer);
    timer = setTimeout(() => void search(value.trim()), SEARCH_DELAY_MS);
  });
  await search('');
  if (failed) {
    typing.dispose();
    pick.dispose();
    return;
  }
  const chosen = await new Promise<TargetItem | undefined>((resolve) => {
    pick.onDidAccept(() => resolve(pick.selectedItems[0]));
    pick.onDidHide(() => resolve(undefined));
  });
  clearTimeout(timer);
  typing.dispose();
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
