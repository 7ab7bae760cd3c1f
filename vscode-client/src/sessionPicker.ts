// The quick pick every session command uses ("Go to session", "Select target session", "Insert
// session mention"): every keystroke asks the server (the candidates list is capped, so filtering
// the first rows here would never find an older session), in dsh's rank order, and only the
// newest answer is shown (LatestSearch). A failed search closes the pick with an error that says why.

import * as vscode from 'vscode';

import { errorText, formatCandidate } from './format';
import { asCandidates, Candidate, SERVER_COMMANDS } from './protocol';
import { LatestSearch } from './search';
import { ServerController } from './serverController';

/** Milliseconds of quiet typing before the picker asks the server again. */
export const SEARCH_DELAY_MS = 120;

/** A row above the sessions (such as "No target"): picking it gives back its `choice`. */
export interface FixedRow extends vscode.QuickPickItem {
  readonly choice: string;
}

export interface SessionPickOptions {
  readonly title: string;
  readonly placeholder: string;
  /** The prompt the candidates are for (the server leaves out its target session). */
  readonly documentUri?: string;
  /** Rows shown at once above the sessions, which come under a "Sessions" separator. */
  readonly fixed?: readonly FixedRow[];
  /** Marks a session's row (such as "mentioned"), before its age and folder. */
  readonly mark?: (candidate: Candidate) => string | undefined;
  /** Rows below the sessions, under a separator: `heading` names it, given the sessions found. */
  readonly trailing?: { readonly rows: readonly FixedRow[]; readonly heading: (found: number, query: string) => string };
}

/**
 * What the user picked: a session, or a fixed or trailing row's choice with what was typed then;
 * undefined when the pick was closed.
 */
export type SessionPick = { readonly candidate: Candidate } | { readonly choice: string; readonly query: string } | undefined;

/**
 * `QuickPick.sortByLabel`: false keeps the rows in the order they are given. It is still a
 * proposed API (microsoft/vscode#73904) and absent from `@types/vscode`, but the extension host
 * passes it on to the workbench without asking for the proposal (checked in VS Code 1.139.1).
 */
type Unsorted<T extends vscode.QuickPickItem> = vscode.QuickPick<T> & { sortByLabel: boolean };

interface Row extends vscode.QuickPickItem {
  readonly candidate?: Candidate;
  readonly choice?: string;
}

export function pickSession(controller: ServerController, options: SessionPickOptions): Promise<SessionPick> {
  const pick = vscode.window.createQuickPick<Row>();
  pick.title = options.title;
  pick.placeholder = options.placeholder;
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  // The server has matched and ranked the rows: VS Code would otherwise move those whose title
  // it matches to the top by its own score (dsh's first for `Benchmark` came twelfth).
  (pick as Unsorted<Row>).sortByLabel = false;
  const fixed = options.fixed ?? [];
  pick.items = fixed;
  const search = new LatestSearch<Candidate[], vscode.CancellationToken>(
    {
      run: async (query, token) => {
        const asked = options.documentUri === undefined ? { query } : { documentUri: options.documentUri, query };
        return asCandidates(await controller.executeCommand(SERVER_COMMANDS.candidates, [asked], token));
      },
      show: (candidates, query) => {
        const now = new Date();
        const rows: Row[] = candidates.map((candidate) => {
          const row = formatCandidate(candidate, now);
          // Shown whatever VS Code's own filter thinks: the server has matched it already.
          const mark = options.mark?.(candidate);
          const description = mark === undefined ? row.description : [mark, row.description].filter((part) => part !== '').join(' · ');
          return { label: row.label, description, detail: row.detail || undefined, candidate, alwaysShow: true };
        });
        const heading: Row = { label: query === '' ? 'Sessions' : `Sessions matching “${query}”`, kind: vscode.QuickPickItemKind.Separator };
        const trailing = options.trailing;
        const after: Row[] =
          trailing === undefined
            ? []
            : [{ label: trailing.heading(candidates.length, query), kind: vscode.QuickPickItemKind.Separator }, ...trailing.rows.map((row) => ({ ...row, alwaysShow: true }))];
        pick.items = [...(fixed.length === 0 ? rows : [...fixed, heading, ...rows]), ...after];
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
  return new Promise<SessionPick>((resolve) => {
    const disposables: vscode.Disposable[] = [];
    const finish = (picked: SessionPick): void => {
      resolve(picked);
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
        if (chosen?.candidate !== undefined) {
          finish({ candidate: chosen.candidate });
        } else if (chosen?.choice !== undefined) {
          finish({ choice: chosen.choice, query: pick.value.trim() });
        }
      }),
      pick.onDidHide(() => finish(undefined)),
    );
    pick.show();
    void search.now('');
  });
}
