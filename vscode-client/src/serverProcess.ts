// The server's process, owned by the extension rather than by vscode-languageclient: the client
// is handed a process already running (ServerOptions as a function), so that the server can be
// spawned the moment the extension's code starts to run, while VS Code is still preparing the
// extension's context (earlyStart.ts), and the client started on it then. The controller then
// ends each process itself. Free of `vscode`, so the Node unit tests run it against real processes.

import { ChildProcess, spawn } from 'node:child_process';

/** How one server process is started: the interpreter, the launcher's arguments, the folder. */
export interface SpawnSpec {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
}

/** The arguments the launcher runs the language server with. */
export function serverArgs(launcher: string, logLevel: string): string[] {
  return [launcher, 'lsp', '--log-level', logLevel];
}

/** True when `a` and `b` start the same server (a process spawned for one serves the other). */
export function sameSpec(a: SpawnSpec, b: SpawnSpec): boolean {
  return a.command === b.command && a.cwd === b.cwd && a.args.length === b.args.length && a.args.every((arg, at) => arg === b.args[at]);
}

/**
 * Spawns a server over stdio. A spawn that fails (no such file) reports it on the process's
 * 'error' event, which is listened to here so that it never throws in the extension host; the
 * caller sees `pid === undefined`.
 */
export function spawnServer(spec: SpawnSpec, onError: (error: Error) => void = () => undefined): ChildProcess {
  const child = spawn(spec.command, [...spec.args], {
    cwd: spec.cwd,
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
    stdio: 'pipe',
  });
  child.on('error', onError);
  return child;
}

/** True while `child` has not exited. */
export function running(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

/** Resolves when `child` has exited (at once if it already has), or after `timeoutMs`. */
export function exited(child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  if (child === undefined || !running(child)) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Waits up to `graceMs` for `child` to exit (the client has asked it to: `shutdown`, `exit`),
 * then kills it and waits for that, as vscode-languageclient does for a process it spawned itself.
 */
export async function ended(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  await exited(child, graceMs);
  if (child !== undefined && running(child)) {
    child.kill('SIGKILL');
    await exited(child, graceMs);
  }
}

/**
 * A server spawned before anyone asked for one: the first start whose spec is the same takes it;
 * any other start, or none, has it killed. Spawned speculatively, it runs the same interpreter the
 * start would run (found the same way), only earlier: the client that talks to it before the
 * interpreter is probed (`ServerController.startEarly`) is stopped, and it with it, if the probe
 * then finds the interpreter unusable.
 */
export class EarlyServer {
  private child: ChildProcess | undefined;

  constructor(
    readonly spec: SpawnSpec,
    child: ChildProcess,
    /** When it was spawned (Date.now()). */
    readonly spawnedAt: number,
  ) {
    this.child = child;
  }

  /**
   * The process, if it was spawned for `spec` and is still running; else undefined, and the
   * process is killed. Either way it is handed out at most once.
   */
  take(spec: SpawnSpec): ChildProcess | undefined {
    const child = this.child;
    this.child = undefined;
    if (child === undefined) {
      return undefined;
    }
    if (sameSpec(this.spec, spec) && running(child)) {
      return child;
    }
    child.kill('SIGKILL');
    return undefined;
  }

  /** Kills the process unless a start has taken it. */
  discard(): void {
    this.take({ command: '', args: [], cwd: '' });
  }
}
