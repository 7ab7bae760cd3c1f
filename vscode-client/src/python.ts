// Which Python runs the server, and whether it can: the interpreter setting, the Python
// extension's environment, a trusted workspace's .venv, else python3 on PATH (interpreter.ts
// decides, free of `vscode`); then a probe of that interpreter, kept between windows. A change of
// the Python extension's environment, or a kept probe that no longer holds, asks for a restart.

import { PVSC_EXTENSION_ID, PythonExtension, ResolvedEnvironment } from '@vscode/python-extension';
import * as vscode from 'vscode';

import { errorText } from './format';
import {
  findInterpreter,
  formatVersion,
  InterpreterChoice,
  InterpreterNotFound,
  probeInterpreter,
  probeKey,
  probeProblems,
  ProbeResult,
} from './interpreter';
import { NoticeAction, Notices } from './notices';
import { interpreterSetting, pathContext } from './workspaceSettings';

/**
 * Where the last probe that found no problem is kept (globalState): a start with the same
 * interpreter file, launcher and extension version skips the probe, a whole Python start (0.2-0.5 s
 * of every window's first `@`), and probes again a while after the server runs.
 */
const PROBE_CACHE = 'dshSessionReference.probe';

/** How long after a start on a kept probe the interpreter is probed again. */
const PROBE_RECHECK_MS = 20_000;

interface KeptProbe {
  readonly key: string;
  readonly probe: ProbeResult;
}

export interface ResolvedInterpreter {
  readonly choice: InterpreterChoice;
  readonly probe: ProbeResult;
}

export class PythonInterpreter implements vscode.Disposable {
  private watchingPythonExtension = false;
  private readonly disposables: vscode.Disposable[] = [];
  /** Set when the server is started on a kept probe (see PROBE_CACHE): probed again once it runs. */
  private recheckProbe: { choice: InterpreterChoice; key: string } | undefined;
  /** The interpreter the running (or last started) server uses, and why: for the tooltip. */
  interpreter: { choice: InterpreterChoice; version: string } | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
    private readonly notices: Notices,
    private readonly restart: (reason: string) => void,
  ) {}

  /** The script the interpreter runs: it starts the bundled server. */
  get launcher(): string {
    return this.context.asAbsolutePath('python/launch_server.py');
  }

  /** The interpreter to start the server with, or undefined after saying why there is none. */
  async resolve(): Promise<ResolvedInterpreter | undefined> {
    let choice: InterpreterChoice;
    try {
      choice = findInterpreter({
        pythonEnvironment: await this.pythonEnvironment(),
        setting: interpreterSetting(),
        // A workspace's own .venv is code from the workspace: run it only once the workspace is
        // trusted (the interpreter setting is a restricted configuration for the same reason).
        workspaceFolders: vscode.workspace.isTrusted ? (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath) : [],
        platform: process.platform,
        envPath: process.env.PATH ?? '',
        envPathExt: process.env.PATHEXT,
        paths: pathContext(),
      });
    } catch (error) {
      const detail = error instanceof InterpreterNotFound ? error.message : String(error);
      void this.notices.once('interpreter', 'error', `DSH Session Reference needs Python 3.11 or newer. ${detail}`, ['Open Settings', 'Show Output']);
      return undefined;
    }
    if (choice.passedOver !== undefined) {
      this.output.info(`not using the Python extension's environment: ${choice.passedOver}`);
    }
    this.output.info(`interpreter: ${choice.executable} (from ${choice.origin})`);
    const key = probeKey(choice.executable, this.launcher, String(this.context.extension.packageJSON.version));
    const kept = this.context.globalState.get<KeptProbe>(PROBE_CACHE);
    let probe: ProbeResult;
    if (key !== undefined && kept?.key === key) {
      probe = kept.probe;
      this.recheckProbe = { choice, key };
    } else {
      try {
        probe = await this.probe(choice);
      } catch (error) {
        void this.notices.once(
          'interpreter',
          'error',
          `DSH Session Reference could not use ${choice.origin}: ${errorText(error)}`,
          ['Open Settings', 'Show Output'],
        );
        return undefined;
      }
      const clean = probeProblems(choice, probe).every((problem) => problem.severity === 'info');
      await this.context.globalState.update(PROBE_CACHE, clean && key !== undefined ? { key, probe } : undefined);
    }
    this.output.info(`Python ${formatVersion(probe.version)} on ${probe.platform}`);
    this.interpreter = { choice, version: formatVersion(probe.version) };
    let fatal = false;
    for (const problem of probeProblems(choice, probe)) {
      if (problem.severity === 'info') {
        this.output.info(problem.message);
        continue;
      }
      fatal ||= problem.severity === 'fatal';
      const actions: NoticeAction[] = problem.key === 'interpreter' ? ['Open Settings', 'Show Output'] : ['Show Output'];
      void this.notices.once(problem.key, problem.severity === 'fatal' ? 'error' : 'warning', problem.message, actions);
    }
    if (fatal) {
      return undefined;
    }
    return { choice, probe };
  }

  /** The server started: one started on a kept probe is probed again a while later. */
  started(): void {
    const recheck = this.recheckProbe;
    this.recheckProbe = undefined;
    if (recheck !== undefined) {
      // Not beside the server's own start (its first listing): both would share two cores.
      setTimeout(() => void this.recheck(recheck), PROBE_RECHECK_MS);
    }
  }

  /** The server failed to start: whatever the kept probe said, the next start probes again. */
  async failed(): Promise<void> {
    this.recheckProbe = undefined;
    await this.context.globalState.update(PROBE_CACHE, undefined);
  }

  dispose(): void {
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }

  private probe(choice: InterpreterChoice): Promise<ProbeResult> {
    return probeInterpreter(choice.executable, { launcher: this.launcher, cwd: this.context.extensionPath, env: process.env });
  }

  /**
   * The server started on a kept probe: probe again now it runs. A different result replaces the
   * kept one; one with problems restarts the server, which then probes and says what is wrong.
   */
  private async recheck(check: { choice: InterpreterChoice; key: string }): Promise<void> {
    let fresh: ProbeResult | undefined;
    try {
      fresh = await this.probe(check.choice);
    } catch {
      fresh = undefined;
    }
    const kept = this.context.globalState.get<KeptProbe>(PROBE_CACHE);
    if (fresh !== undefined && JSON.stringify(kept?.probe) === JSON.stringify(fresh)) {
      return;
    }
    const clean = fresh !== undefined && probeProblems(check.choice, fresh).every((problem) => problem.severity === 'info');
    await this.context.globalState.update(PROBE_CACHE, clean ? { key: check.key, probe: fresh } : undefined);
    if (!clean) {
      this.restart('the interpreter no longer probes as it did; restarting the server to check it');
    }
  }

  /**
   * The Python extension's active environment for the first workspace folder, when that extension
   * is installed and the workspace trusted (its environment may be the workspace's own `.venv`).
   * A change of that environment restarts the server unless the interpreter setting decides.
   */
  private async pythonEnvironment(): Promise<ResolvedEnvironment | 'none' | undefined> {
    if (vscode.extensions.getExtension(PVSC_EXTENSION_ID) === undefined || !vscode.workspace.isTrusted) {
      return undefined;
    }
    try {
      const api = await PythonExtension.api();
      if (!this.watchingPythonExtension) {
        this.watchingPythonExtension = true;
        this.disposables.push(
          api.environments.onDidChangeActiveEnvironmentPath(() => {
            if (interpreterSetting().trim() === '') {
              this.restart("the Python extension's active environment changed; restarting the server to use it");
            }
          }),
        );
      }
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      return (await api.environments.resolveEnvironment(api.environments.getActiveEnvironmentPath(folder))) ?? 'none';
    } catch (error) {
      this.output.warn(`the Python extension's environment API failed: ${errorText(error)}`);
      return 'none';
    }
  }
}
