// Finding the Python that runs the language server. The extension ships the server and its
// libraries, so any Python 3.11+ will do; this module decides which one and checks it. It has no
// `vscode` import (the Python extension's types are erased at compile time) so that the Node unit
// tests exercise it against real files and processes.

import type { ResolvedEnvironment } from '@vscode/python-extension';
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants, realpathSync, statSync } from 'node:fs';
import * as path from 'node:path';

import { expandVariables, PathContext } from './paths';

export const MIN_PYTHON: readonly [number, number] = [3, 11];

export type InterpreterSource = 'setting' | 'python-extension' | 'workspace-venv' | 'path';

export interface InterpreterChoice {
  readonly executable: string;
  readonly source: InterpreterSource;
  /** Where it came from, in words a notification can show. */
  readonly origin: string;
  /** Why the Python extension's active environment was not taken, when it was there and was not. */
  readonly passedOver?: string;
}

export interface LookupInput {
  /** The raw `dshSessionReference.interpreter` value. */
  readonly setting: string;
  /** Workspace folder paths, first one first. */
  readonly workspaceFolders: readonly string[];
  readonly platform: NodeJS.Platform;
  /** Search path (`PATH`) and `PATHEXT` of the environment the server will run in. */
  readonly envPath: string;
  readonly envPathExt?: string;
  readonly paths: PathContext;
  /**
   * The Python extension's active environment for the workspace; `'none'` when that extension
   * has none (or could not say); left out when it is not installed or the workspace is not trusted.
   */
  readonly pythonEnvironment?: ResolvedEnvironment | 'none';
}

/**
 * The Python extension's active environment as a choice, or why it cannot be one. Its version is
 * known without running it, so an old one is passed over here rather than failing the probe.
 */
export function fromPythonExtension(environment: ResolvedEnvironment | 'none'): InterpreterChoice | { passedOver: string } {
  const executable = environment === 'none' ? undefined : environment.executable.uri?.fsPath;
  if (environment === 'none' || executable === undefined) {
    return { passedOver: 'the Python extension has no active environment with a Python executable' };
  }
  const version = environment.version;
  const name = environment.environment?.name ?? executable;
  if (version !== undefined && !isSupportedVersion([version.major, version.minor, version.micro])) {
    return {
      passedOver: `the Python extension's active environment (${name}) is Python ${version.major}.${version.minor}, and the server needs ${MIN_PYTHON.join('.')}+`,
    };
  }
  return { executable, source: 'python-extension', origin: `the Python extension's active environment (${name})` };
}

export class InterpreterNotFound extends Error {
  constructor(
    message: string,
    readonly source: InterpreterSource,
  ) {
    super(message);
    this.name = 'InterpreterNotFound';
  }
}

/** Windows' PATHEXT when the environment has none. */
const DEFAULT_PATHEXT = '.EXE;.CMD;.BAT;.COM';

/**
 * Whether `candidate` is a file this user may run. Synchronous, as the whole lookup is: the
 * extension host runs a promise's continuation only after the work queued before it, which as
 * the extension starts is the other extensions' activation (0.3-0.5 s of the start in the e2e
 * runs, for a handful of stat calls).
 */
function isExecutableFile(candidate: string, platform: NodeJS.Platform): boolean {
  try {
    if (!statSync(candidate).isFile()) {
      return false;
    }
    if (platform !== 'win32') {
      accessSync(candidate, fsConstants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * A lookup as steps: it yields each file to check and is sent back whether that is an executable
 * file, which keeps the order of the lookup apart from the file system.
 */
type Lookup<T> = Generator<string, T, boolean>;

function checked<T>(steps: Lookup<T>, platform: NodeJS.Platform): T {
  let step = steps.next();
  while (!step.done) {
    step = steps.next(isExecutableFile(step.value, platform));
  }
  return step.value;
}

/** Resolves a bare command name the way a shell would, without spawning one. */
export function which(command: string, envPath: string, platform: NodeJS.Platform, envPathExt = DEFAULT_PATHEXT): string | undefined {
  return checked(whichSteps(command, envPath, platform, envPathExt), platform);
}

function* whichSteps(command: string, envPath: string, platform: NodeJS.Platform, envPathExt: string): Lookup<string | undefined> {
  const delimiter = platform === 'win32' ? ';' : ':';
  const extensions = platform === 'win32' && path.extname(command) === '' ? envPathExt.split(';') : [''];
  for (const dir of envPath.split(delimiter)) {
    if (dir === '') {
      continue;
    }
    for (const ext of extensions) {
      const candidate = path.join(dir, command + ext.toLowerCase());
      if (yield candidate) {
        return candidate;
      }
    }
  }
  return undefined;
}

function venvPython(folder: string, platform: NodeJS.Platform): string {
  return platform === 'win32'
    ? path.join(folder, '.venv', 'Scripts', 'python.exe')
    : path.join(folder, '.venv', 'bin', 'python');
}

/**
 * The interpreter setting wins when set (a wrong setting is an error, not a reason to guess: it
 * is the one place a user names an interpreter for this extension alone); then the Python
 * extension's active environment, as every Python tool in VS Code follows it; then the first
 * workspace folder with a `.venv`; then `python3` on PATH. It throws InterpreterNotFound. It waits
 * for no event loop (see isExecutableFile): the start and the server spawned as the extension's code
 * loads (earlyStart.ts) both run it.
 */
export function findInterpreter(input: LookupInput): InterpreterChoice {
  return checked(lookup(input), input.platform);
}

function* lookup(input: LookupInput): Lookup<InterpreterChoice> {
  const fromExtension = input.pythonEnvironment === undefined ? undefined : fromPythonExtension(input.pythonEnvironment);
  const choice = yield* lookupSteps(input, fromExtension !== undefined && !('passedOver' in fromExtension) ? fromExtension : undefined);
  const passedOver = fromExtension !== undefined && 'passedOver' in fromExtension ? fromExtension.passedOver : undefined;
  return passedOver !== undefined && choice.source !== 'setting' ? { ...choice, passedOver } : choice;
}

function* lookupSteps(input: LookupInput, fromExtension: InterpreterChoice | undefined): Lookup<InterpreterChoice> {
  const { platform } = input;
  const setting = input.setting.trim();
  if (setting !== '') {
    const expanded = expandVariables(setting, input.paths);
    const isBareName = !expanded.includes('/') && !(platform === 'win32' && expanded.includes('\\'));
    const executable = isBareName
      ? yield* whichSteps(expanded, input.envPath, platform, input.envPathExt ?? DEFAULT_PATHEXT)
      : path.resolve(input.paths.workspaceFolder ?? input.paths.home, expanded);
    if (executable !== undefined && (yield executable)) {
      return { executable, source: 'setting', origin: `the "dshSessionReference.interpreter" setting (${setting})` };
    }
    throw new InterpreterNotFound(
      `The "dshSessionReference.interpreter" setting names ${setting}, which is not an executable file.`,
      'setting',
    );
  }
  if (fromExtension !== undefined) {
    return fromExtension;
  }
  for (const folder of input.workspaceFolders) {
    const candidate = venvPython(folder, platform);
    if (yield candidate) {
      return { executable: candidate, source: 'workspace-venv', origin: `the workspace virtual environment (${candidate})` };
    }
  }
  const names = platform === 'win32' ? ['python3', 'python', 'py'] : ['python3'];
  for (const name of names) {
    const found = yield* whichSteps(name, input.envPath, platform, input.envPathExt ?? DEFAULT_PATHEXT);
    if (found !== undefined) {
      return { executable: found, source: 'path', origin: `${name} on PATH (${found})` };
    }
  }
  throw new InterpreterNotFound('No Python was found: no interpreter setting, no workspace .venv, and no python3 on PATH.', 'path');
}

/** What `launch_server.py --probe` reports about an interpreter and the libraries it can import. */
export interface ProbeResult {
  readonly version: readonly [number, number, number];
  readonly executable: string;
  readonly platform: string;
  /** null when the server package and its pure-Python libraries import; else the import error. */
  readonly serverError: string | null;
  /** null when a Zstandard codec loads (Python 3.14's own, backports.zstd or zstandard). */
  readonly zstdError: string | null;
  readonly icuError: string | null;
}

function nullableString(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** Reads the probe's single JSON line; anything else means the file is not a usable Python. */
export function parseProbeOutput(stdout: string): ProbeResult {
  const line = stdout.trim().split(/\r?\n/).pop() ?? '';
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw new Error(`unexpected probe output: ${JSON.stringify(stdout.slice(0, 200))}`);
  }
  if (typeof raw !== 'object' || raw === null) {
    throw new Error('unexpected probe output: not an object');
  }
  const record = raw as Record<string, unknown>;
  const version = record.version;
  if (!Array.isArray(version) || version.length < 3 || !version.slice(0, 3).every((n) => Number.isInteger(n))) {
    throw new Error('unexpected probe output: no version');
  }
  return {
    version: [version[0] as number, version[1] as number, version[2] as number],
    executable: typeof record.executable === 'string' ? record.executable : '',
    platform: typeof record.platform === 'string' ? record.platform : '',
    serverError: nullableString(record.server_error),
    zstdError: nullableString(record.zstd_error),
    icuError: nullableString(record.icu_error),
  };
}

export function formatVersion(version: readonly number[]): string {
  return version.join('.');
}

export function isSupportedVersion(version: readonly number[]): boolean {
  const [major, minor] = version;
  return major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
}

export interface ProbeOptions {
  readonly launcher: string;
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs?: number;
}

function run(executable: string, args: string[], options: ProbeOptions): Promise<{ stdout: string; detail: string }> {
  return new Promise((resolve) => {
    execFile(
      executable,
      args,
      { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 15000, windowsHide: true },
      (error, stdout, stderr) => {
        const detail = String(stderr).trim().split(/\r?\n/).slice(-2).join(' ') || (error?.message ?? '');
        resolve({ stdout: String(stdout), detail });
      },
    );
  });
}

// Python 2 and 3.0-3.6 cannot even parse the launcher; this one-liner still tells their version.
const VERSION_ONLY = 'import sys; sys.stdout.write(str(list(sys.version_info[:3])))';

/** Runs the launcher in probe mode; rejects with the interpreter's own words when it cannot. */
export async function probeInterpreter(executable: string, options: ProbeOptions): Promise<ProbeResult> {
  const probe = await run(executable, [options.launcher, '--probe'], options);
  try {
    return parseProbeOutput(probe.stdout);
  } catch {
    const fallback = await run(executable, ['-c', VERSION_ONLY], options);
    const version = /^\[(\d+), (\d+), (\d+)\]$/.exec(fallback.stdout.trim());
    if (version !== null) {
      const numbers: [number, number, number] = [Number(version[1]), Number(version[2]), Number(version[3])];
      if (!isSupportedVersion(numbers)) {
        return { version: numbers, executable, platform: '', serverError: 'Python is too old', zstdError: null, icuError: null };
      }
    }
    throw new Error(`${executable} could not run the server launcher: ${probe.detail || 'no output'}`);
  }
}

/** The sentence a user reads when the interpreter is too old, with what to do about it. */
export function tooOldMessage(choice: InterpreterChoice, probe: ProbeResult): string {
  return (
    `DSH Session Reference needs Python ${formatVersion(MIN_PYTHON)} or newer, but ${choice.origin} is ` +
    `Python ${formatVersion(probe.version)}. Set "dshSessionReference.interpreter" to a Python ` +
    `${formatVersion(MIN_PYTHON)}+ interpreter, or create a .venv in the workspace with one.`
  );
}

/** Something the user should know about the chosen interpreter, worded for a notification. */
export interface ProbeProblem {
  /** Problems with the same key are shown once per session. */
  readonly key: 'interpreter' | 'server-import' | 'zstd' | 'icu';
  /** 'fatal': the server cannot start; 'warning': it runs without a feature; 'info': output channel only. */
  readonly severity: 'fatal' | 'warning' | 'info';
  readonly message: string;
}

/**
 * What the probe means for the user. The compiled libraries are optional: without a Zstandard
 * codec (built into Python 3.14+) the server cannot read compressed logs, without ICU it
 * approximates one ordering rule; only a Python that is too old or a server that does not import
 * stops it.
 */
export function probeProblems(choice: InterpreterChoice, probe: ProbeResult): ProbeProblem[] {
  const python = `Python ${formatVersion(probe.version)}`;
  const where = probe.platform === '' ? python : `${python} on ${probe.platform}`;
  const installZstd = `"${choice.executable}" -m pip install backports.zstd`;
  if (!isSupportedVersion(probe.version)) {
    return [{ key: 'interpreter', severity: 'fatal', message: tooOldMessage(choice, probe) }];
  }
  if (probe.serverError !== null) {
    // The server loads a Zstandard codec only when it meets a compressed log, so a failed import
    // is never the codec's doing: the message is the import error itself.
    return [
      {
        key: 'server-import',
        severity: 'fatal',
        message: `The DSH Session Reference server could not load with ${python} (${choice.origin}): ${probe.serverError}`,
      },
    ];
  }
  const problems: ProbeProblem[] = [];
  if (probe.zstdError !== null) {
    problems.push({
      key: 'zstd',
      severity: 'warning',
      message: `No Zstandard decoder is available for ${where}, so compressed (.jsonl.zstd) session logs cannot be read. Python 3.14 has one built in; or run: ${installZstd}`,
    });
  }
  if (probe.icuError !== null) {
    problems.push({
      key: 'icu',
      severity: 'info',
      message:
        `ICU is not available for ${where} (${probe.icuError}); sessions created at the same moment are ` +
        'ordered by an approximation of ICU collation.',
    });
  }
  return problems;
}

/**
 * What a probe's result depends on, as a string: the interpreter's real file (a virtual
 * environment's `python` is a link to it) with its size and modification time, and the launcher
 * and extension version that ran the probe. Undefined when the file cannot be read. A probe kept
 * under this key is valid while the key is the same (see PythonInterpreter's probe cache, python.ts).
 */
export function probeKey(executable: string, launcher: string, extensionVersion: string): string | undefined {
  try {
    const real = realpathSync.native(executable);
    const stat = statSync(real);
    return JSON.stringify([executable, real, stat.size, stat.mtimeMs, launcher, extensionVersion]);
  } catch {
    return undefined;
  }
}
