// The settings as VS Code holds them: read for the server (the mapping itself, free of `vscode`
// and unit tested, is settings.ts), and what a change of them asks of the server.

import * as os from 'node:os';
import * as vscode from 'vscode';

import { PathContext } from './paths';
import { LanguageFilter, SECTION, SERVER_KEYS, serverLogLevel, ServerSettings, toDocumentSelector, toServerSettings } from './settings';

export function pathContext(folder?: vscode.WorkspaceFolder): PathContext {
  const workspaceFolder = folder ?? vscode.workspace.workspaceFolders?.[0];
  return { home: os.homedir(), workspaceFolder: workspaceFolder?.uri.fsPath, env: process.env };
}

export function currentServerSettings(scope?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  const folder = scope === undefined ? undefined : vscode.workspace.getWorkspaceFolder(scope);
  return toServerSettings((key) => config.get(key), pathContext(folder), (key) => userValue(config, key));
}

/** A setting's user-level value (user or remote settings), never a workspace's or folder's. */
export function userValue(config: vscode.WorkspaceConfiguration, key: string): unknown {
  return config.inspect(key)?.globalValue;
}

/** The languages the server checks, from the user's documentSelector setting. */
export function documentSelectorSetting(): LanguageFilter[] {
  return toDocumentSelector(userValue(vscode.workspace.getConfiguration(SECTION), 'documentSelector'));
}

/** The interpreter setting as written ('' when unset: the interpreter is found). */
export function interpreterSetting(): string {
  return vscode.workspace.getConfiguration(SECTION).get<string>('interpreter') ?? '';
}

export function serverLogLevelSetting(): string {
  return serverLogLevel(vscode.workspace.getConfiguration(SECTION).get('server.logLevel'));
}

/**
 * What a settings change asks of the server: a restart for what it starts with (the interpreter,
 * the documents it checks, its log level), the new settings for the rest of its own (applied to
 * open documents without a restart), nothing for the client's.
 */
export function settingsChange(event: vscode.ConfigurationChangeEvent): 'restart' | 'push' | undefined {
  if (
    event.affectsConfiguration(`${SECTION}.interpreter`) ||
    event.affectsConfiguration(`${SECTION}.documentSelector`) ||
    event.affectsConfiguration(`${SECTION}.server.logLevel`)
  ) {
    return 'restart';
  }
  return SERVER_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`)) ? 'push' : undefined;
}
