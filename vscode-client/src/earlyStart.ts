// The server spawned as soon as the extension's code runs (extension.ts imports this right after
// the start's clock, so the bundle evaluates it before the language client and the rest). VS Code
// loads an extension's module and prepares its context (its stored state, over IPC to a window
// that is itself starting) side by side, and calls `activate` only once both are done, after the
// other extensions activated by the same event: 0.3-2.3 s in the e2e runs. The server's own
// start (about 0.4 s of imports) runs in that time instead of after it. Everything here is
// synchronous: a promise's continuation would run only after those other extensions' work. The
// interpreter is found as the start finds it (python.ts). The language client starts on this
// process as soon as the module has loaded (extension.ts, `ServerController.startEarly`); the start
// after `activate` keeps it only if it resolves the same interpreter and its probe (kept or fresh)
// is clean, else it is stopped.

import { PVSC_EXTENSION_ID } from '@vscode/python-extension';
import * as path from 'node:path';
import * as vscode from 'vscode';

import { findInterpreter } from './interpreter';
import { EarlyServer, serverArgs, SpawnSpec, spawnServer } from './serverProcess';
import { interpreterSetting, pathContext, serverLogLevelSetting } from './workspaceSettings';

/** The bundle is dist/extension.js; the extension's folder is its parent. */
const extensionPath = path.dirname(__dirname);

function spawnEarly(): EarlyServer | undefined {
  const setting = interpreterSetting();
  // Which environment the Python extension picks is known only once it has activated: no guess.
  if (setting.trim() === '' && vscode.workspace.isTrusted && vscode.extensions.getExtension(PVSC_EXTENSION_ID) !== undefined) {
    return undefined;
  }
  try {
    const choice = findInterpreter({
      setting,
      workspaceFolders: vscode.workspace.isTrusted ? (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath) : [],
      platform: process.platform,
      envPath: process.env.PATH ?? '',
      envPathExt: process.env.PATHEXT,
      paths: pathContext(),
    });
    // As the start will spawn it (serverController.ts): the launcher python.ts names, the folder.
    const spec: SpawnSpec = { command: choice.executable, args: serverArgs(path.join(extensionPath, 'python', 'launch_server.py'), serverLogLevelSetting()), cwd: extensionPath };
    const child = spawnServer(spec);
    return child.pid === undefined ? undefined : new EarlyServer(spec, child, Date.now());
  } catch {
    return undefined; // the start finds no interpreter either, and says why
  }
}

/** The server spawned as the extension's code began to run, if one could be. */
export const earlyServer: EarlyServer | undefined = spawnEarly();
