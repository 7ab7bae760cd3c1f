// Path settings are typed by people: accept the variables VS Code users already write in
// settings.json (`~`, `${workspaceFolder}`, `${userHome}`, `${env:NAME}`) so a shared
// `.vscode/settings.json` works on every machine.

import * as path from 'node:path';

export interface PathContext {
  readonly home: string;
  /** The first workspace folder, when there is one. */
  readonly workspaceFolder?: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

export function expandVariables(value: string, context: PathContext): string {
  let result = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (match, name: string, envName?: string) => {
    if (envName !== undefined) {
      return context.env[envName] ?? '';
    }
    if (name === 'userHome') {
      return context.home;
    }
    return context.workspaceFolder ?? match;
  });
  if (result === '~' || result.startsWith('~/') || result.startsWith('~\\')) {
    result = context.home + result.slice(1);
  }
  return result;
}

/** Expands variables, then anchors a relative path at the workspace folder (else the home folder). */
export function resolveUserPath(value: string, context: PathContext): string {
  const trimmed = value.trim();
  if (trimmed === '') {
    return '';
  }
  const expanded = expandVariables(trimmed, context);
  return path.resolve(context.workspaceFolder ?? context.home, expanded);
}
