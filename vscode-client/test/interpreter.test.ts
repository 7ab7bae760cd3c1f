// Interpreter lookup against real files and real processes: temporary folders with executable
// scripts stand in for interpreters, and the pyenv-style Pythons on PATH are run for real.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { ResolvedEnvironment } from '@vscode/python-extension';

import {
  findInterpreter,
  fromPythonExtension,
  InterpreterNotFound,
  isSupportedVersion,
  LookupInput,
  parseProbeOutput,
  probeInterpreter,
  probeKey,
  probeProblems,
  ProbeResult,
  tooOldMessage,
  which,
} from '../src/interpreter';

const LAUNCHER = path.resolve(__dirname, '..', '..', 'python', 'launch_server.py');

let root: string;

async function executable(file: string, body = '#!/bin/sh\nexit 0\n'): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, body, { mode: 0o755 });
  return file;
}

function input(overrides: Partial<LookupInput>): LookupInput {
  return {
    setting: '',
    workspaceFolders: [],
    platform: 'linux',
    envPath: '',
    paths: { home: path.join(root, 'home'), env: {} },
    ...overrides,
  };
}

before(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'dsh-interpreter-'));
});

after(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** An environment as the Python extension's API resolves it (its published type, filled in). */
function pythonEnvironment(executablePath: string | undefined, version: [number, number, number], name = 'project-env'): ResolvedEnvironment {
  const uri = (fsPath: string) => ({ fsPath, path: fsPath, scheme: 'file' }) as unknown as ResolvedEnvironment['path'] & { fsPath: string };
  return {
    id: executablePath ?? name,
    path: executablePath ?? name,
    executable: { uri: executablePath === undefined ? undefined : (uri(executablePath) as never), bitness: '64-bit', sysPrefix: path.dirname(executablePath ?? '/') },
    environment: { type: 'VirtualEnvironment', name, folderUri: uri(path.dirname(executablePath ?? '/')) as never, workspaceFolder: undefined },
    version: { major: version[0], minor: version[1], micro: version[2], release: { level: 'final', serial: 0 }, sysVersion: version.join('.') },
    tools: ['Venv'],
  };
}

describe('findInterpreter with the Python extension', () => {
  test('its active environment comes after the setting and before a workspace .venv and PATH', async () => {
    const workspace = path.join(root, 'p', 'ws');
    await executable(path.join(workspace, '.venv', 'bin', 'python'));
    const bin = path.join(root, 'p', 'bin');
    await executable(path.join(bin, 'python3'));
    const active = await executable(path.join(root, 'p', 'conda', 'bin', 'python'));
    const environment = pythonEnvironment(active, [3, 12, 4], 'analysis');

    const chosen = findInterpreter(input({ workspaceFolders: [workspace], envPath: bin, pythonEnvironment: environment }));
    assert.deepEqual(chosen, { executable: active, source: 'python-extension', origin: "the Python extension's active environment (analysis)" });

    const configured = await executable(path.join(root, 'p', 'custom-python'));
    const bySetting = findInterpreter(input({ setting: configured, envPath: bin, pythonEnvironment: environment }));
    assert.equal(bySetting.source, 'setting');
    assert.equal(bySetting.passedOver, undefined);
  });

  test('an old or empty active environment is passed over, and the choice says why', async () => {
    const workspace = path.join(root, 'q', 'ws');
    const venv = await executable(path.join(workspace, '.venv', 'bin', 'python'));
    const old = await executable(path.join(root, 'q', 'py39', 'bin', 'python'));
    const tooOld = findInterpreter(input({ workspaceFolders: [workspace], pythonEnvironment: pythonEnvironment(old, [3, 9, 18], 'py39') }));
    assert.equal(tooOld.executable, venv);
    assert.equal(tooOld.passedOver, "the Python extension's active environment (py39) is Python 3.9, and the server needs 3.11+");

    const none = findInterpreter(input({ workspaceFolders: [workspace], pythonEnvironment: 'none' }));
    assert.equal(none.executable, venv);
    assert.match(none.passedOver ?? '', /has no active environment/);

    const withoutExecutable = fromPythonExtension(pythonEnvironment(undefined, [3, 12, 0]));
    assert.ok('passedOver' in withoutExecutable);

    const without = findInterpreter(input({ workspaceFolders: [workspace] }));
    assert.equal(without.passedOver, undefined); // no Python extension: nothing to explain
  });
});

describe('findInterpreter without the event loop (the server spawned as the extension loads, and the start)', () => {
  test('finds the setting, a workspace .venv, PATH, skipping what is no executable file; and fails alike', async () => {
    const workspace = path.join(root, 's', 'ws');
    const venv = await executable(path.join(workspace, '.venv', 'bin', 'python'));
    const bin = path.join(root, 's', 'bin');
    const onPath = await executable(path.join(bin, 'python3'));
    await fs.mkdir(path.join(root, 's', 'dir', 'python3'), { recursive: true }); // a folder, not a file
    await executable(path.join(root, 's', 'plain', 'python3'), '');
    await fs.chmod(path.join(root, 's', 'plain', 'python3'), 0o644); // not executable
    const skipped = `${path.join(root, 's', 'dir')}:${path.join(root, 's', 'plain')}`;
    const cases: Partial<LookupInput>[] = [
      { setting: 'python3', envPath: `${skipped}:${bin}` },
      { workspaceFolders: [path.join(root, 's', 'none'), workspace], envPath: bin },
      { workspaceFolders: [path.join(root, 's', 'none')], envPath: `${skipped}:${bin}` },
      { workspaceFolders: [workspace], envPath: bin, pythonEnvironment: 'none' },
    ];
    const found: string[] = [];
    for (const overrides of cases) {
      found.push(findInterpreter(input(overrides)).executable);
    }
    assert.deepEqual(found, [onPath, venv, onPath, venv]);
    for (const overrides of [{ setting: path.join(root, 's', 'plain', 'python3') }, { envPath: skipped }]) {
      assert.throws(() => findInterpreter(input(overrides)), InterpreterNotFound);
    }
  });

});

describe('findInterpreter', () => {
  test('the setting wins over a workspace .venv and PATH', async () => {
    const configured = await executable(path.join(root, 'a', 'custom-python'));
    const workspace = path.join(root, 'a', 'ws');
    await executable(path.join(workspace, '.venv', 'bin', 'python'));
    const bin = path.join(root, 'a', 'bin');
    await executable(path.join(bin, 'python3'));
    const choice = findInterpreter(input({ setting: configured, workspaceFolders: [workspace], envPath: bin }));
    assert.equal(choice.executable, configured);
    assert.equal(choice.source, 'setting');
  });

  test('the setting expands ${workspaceFolder} and ~ and resolves bare names on PATH', async () => {
    const workspace = path.join(root, 'b', 'ws');
    const venvPython = await executable(path.join(workspace, 'tools', 'py'));
    const viaFolder = findInterpreter(
      input({ setting: '${workspaceFolder}/tools/py', workspaceFolders: [workspace], paths: { home: root, workspaceFolder: workspace, env: {} } }),
    );
    assert.equal(viaFolder.executable, venvPython);

    const home = path.join(root, 'b', 'home');
    const homePython = await executable(path.join(home, '.pythons', 'python3.12'));
    const viaHome = findInterpreter(input({ setting: '~/.pythons/python3.12', paths: { home, env: {} } }));
    assert.equal(viaHome.executable, homePython);

    const bin = path.join(root, 'b', 'bin');
    const onPath = await executable(path.join(bin, 'python3.13'));
    const viaName = findInterpreter(input({ setting: 'python3.13', envPath: `/nonexistent:${bin}` }));
    assert.equal(viaName.executable, onPath);
  });

  test('a setting that names no executable is an error, not a reason to guess', async () => {
    const bin = path.join(root, 'c', 'bin');
    await executable(path.join(bin, 'python3'));
    const notExecutable = path.join(root, 'c', 'python-text');
    await fs.writeFile(notExecutable, 'not a program', { mode: 0o644 });
    for (const setting of [path.join(root, 'c', 'missing'), notExecutable, 'no-such-python']) {
      assert.throws(() => findInterpreter(input({ setting, envPath: bin })), (error: unknown) => {
        assert.ok(error instanceof InterpreterNotFound);
        assert.equal(error.source, 'setting');
        assert.match(error.message, /dshSessionReference\.interpreter/);
        return true;
      });
    }
  });

  test('without a setting, the first workspace folder with a .venv is used', async () => {
    const plain = path.join(root, 'd', 'plain');
    await fs.mkdir(plain, { recursive: true });
    const withVenv = path.join(root, 'd', 'with-venv');
    const venvPython = await executable(path.join(withVenv, '.venv', 'bin', 'python'));
    const bin = path.join(root, 'd', 'bin');
    await executable(path.join(bin, 'python3'));
    const choice = findInterpreter(input({ workspaceFolders: [plain, withVenv], envPath: bin }));
    assert.equal(choice.executable, venvPython);
    assert.equal(choice.source, 'workspace-venv');
  });

  test('the Windows .venv layout is Scripts\\python.exe', async () => {
    const workspace = path.join(root, 'w', 'ws');
    const venvPython = await executable(path.join(workspace, '.venv', 'Scripts', 'python.exe'));
    const choice = findInterpreter(input({ workspaceFolders: [workspace], platform: 'win32' }));
    assert.equal(choice.executable, venvPython);
  });

  test('otherwise python3 on PATH, skipping non-executable files and folders', async () => {
    const first = path.join(root, 'e', 'first');
    await fs.mkdir(path.join(first, 'python3'), { recursive: true });
    const second = path.join(root, 'e', 'second');
    await fs.mkdir(second, { recursive: true });
    await fs.writeFile(path.join(second, 'python3'), '', { mode: 0o644 });
    const third = path.join(root, 'e', 'third');
    const found = await executable(path.join(third, 'python3'));
    const choice = findInterpreter(input({ workspaceFolders: [path.join(root, 'e')], envPath: [first, second, third].join(':') }));
    assert.equal(choice.executable, found);
    assert.equal(choice.source, 'path');
  });

  test('nothing at all is a clear error', async () => {
    assert.throws(() => findInterpreter(input({ envPath: path.join(root, 'nothing') })), /no python3 on PATH/);
  });

  test('which honours PATHEXT on Windows', async () => {
    const bin = path.join(root, 'f', 'bin');
    const exe = await executable(path.join(bin, 'python.exe'));
    assert.equal(which('python', bin, 'win32', '.COM;.EXE'), exe);
    assert.equal(which('python', bin, 'linux'), undefined);
  });
});

describe('probe', () => {
  test('parses the launcher line and ignores anything printed before it', () => {
    const probe = parseProbeOutput(
      'warning from sitecustomize\n{"version": [3, 12, 1], "executable": "/x/python", "platform": "linux-x86_64", ' +
        '"server_error": null, "zstd_error": "ImportError: no zstd", "icu_error": null}\n',
    );
    assert.deepEqual(probe.version, [3, 12, 1]);
    assert.equal(probe.serverError, null);
    assert.equal(probe.zstdError, 'ImportError: no zstd');
  });

  test('rejects output that is not a probe', () => {
    assert.throws(() => parseProbeOutput('Python 3.12.1\n'), /unexpected probe output/);
    assert.throws(() => parseProbeOutput('{"version": "3.12"}'), /no version/);
  });

  test('versions below 3.11 are unsupported', () => {
    assert.equal(isSupportedVersion([3, 11, 0]), true);
    assert.equal(isSupportedVersion([3, 14, 2]), true);
    assert.equal(isSupportedVersion([4, 0, 0]), true);
    assert.equal(isSupportedVersion([3, 10, 13]), false);
    assert.equal(isSupportedVersion([2, 7, 18]), false);
  });

  test('runs the real launcher with a real Python 3.11+', async () => {
    const python = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
    const probe = await probeInterpreter(python, { launcher: LAUNCHER, cwd: root, env: process.env });
    assert.ok(isSupportedVersion(probe.version), `python3 is ${probe.version.join('.')}`);
    assert.equal(probe.executable, python);
    assert.match(probe.platform, /^linux-/);
  });

  test('a Python too old to parse the launcher is still reported by version', async () => {
    const fake = await executable(
      path.join(root, 'g', 'python2'),
      '#!/bin/sh\nif [ "$1" = "-c" ]; then printf "[2, 7, 18]"; exit 0; fi\necho "SyntaxError: invalid syntax" >&2\nexit 1\n',
    );
    const probe = await probeInterpreter(fake, { launcher: LAUNCHER, cwd: root, env: process.env });
    assert.deepEqual(probe.version, [2, 7, 18]);
    const message = tooOldMessage({ executable: fake, source: 'path', origin: `python3 on PATH (${fake})` }, probe);
    assert.match(message, /needs Python 3\.11 or newer, but python3 on PATH \(.*python2\) is Python 2\.7\.18/);
    assert.match(message, /dshSessionReference\.interpreter/);
  });

  test('a program that is not Python at all is rejected with its own words', async () => {
    const fake = await executable(path.join(root, 'h', 'not-python'), '#!/bin/sh\necho "command exploded" >&2\nexit 3\n');
    await assert.rejects(probeInterpreter(fake, { launcher: LAUNCHER, cwd: root, env: process.env }), /command exploded/);
  });
});

describe('probeProblems', () => {
  const choice = { executable: '/venv/bin/python', source: 'workspace-venv' as const, origin: 'the workspace virtual environment (/venv/bin/python)' };
  const healthy: ProbeResult = {
    version: [3, 12, 1],
    executable: '/venv/bin/python',
    platform: 'darwin-arm64',
    serverError: null,
    zstdError: null,
    icuError: null,
  };

  test('a healthy interpreter raises nothing', () => {
    assert.deepEqual(probeProblems(choice, healthy), []);
  });

  test('too old is fatal and says what to set', () => {
    const [problem, ...rest] = probeProblems(choice, { ...healthy, version: [3, 10, 13], serverError: 'Python is too old' });
    assert.deepEqual(rest, []);
    assert.equal(problem.severity, 'fatal');
    assert.match(problem.message, /needs Python 3\.11 or newer, but the workspace virtual environment .* is Python 3\.10\.13/);
  });

  test('missing binary libraries degrade with a way out: no zstd codec warns, ICU only logs', () => {
    const problems = probeProblems(choice, { ...healthy, zstdError: 'CodecMissing: no Zstandard decoder is installed', icuError: 'ImportError: x' });
    assert.deepEqual(problems.map((p) => [p.key, p.severity]), [['zstd', 'warning'], ['icu', 'info']]);
    assert.match(problems[0].message, /Python 3\.12\.1 on darwin-arm64, so compressed \(\.jsonl\.zstd\) session logs cannot be read/);
    assert.match(problems[0].message, /"\/venv\/bin\/python" -m pip install backports\.zstd$/);
    assert.match(problems[1].message, /approximation of ICU collation/);
  });

  test('a server that cannot import is fatal, with the import error as the message', () => {
    const broken = probeProblems(choice, { ...healthy, serverError: "ImportError: cannot import name 'x'" });
    assert.equal(broken.length, 1);
    assert.equal(broken[0].severity, 'fatal');
    assert.match(broken[0].message, /could not load with Python 3\.12\.1 .*cannot import name/);
  });
});

describe('probeKey', () => {
  test('the same interpreter file gives the same key; a changed or missing one does not', async () => {
    const folder = await fs.mkdtemp(path.join(os.tmpdir(), 'probe-key-'));
    const python = path.join(folder, 'python3.12');
    await fs.writeFile(python, '#!/bin/sh\n');
    const link = path.join(folder, 'python');
    await fs.symlink(python, link);
    const first = probeKey(link, '/ext/launch_server.py', '0.1.0');
    assert.ok(first !== undefined);
    assert.equal(probeKey(link, '/ext/launch_server.py', '0.1.0'), first);
    assert.notEqual(probeKey(link, '/ext/launch_server.py', '0.1.1'), first);
    await fs.utimes(python, new Date(2020, 0, 1), new Date(2020, 0, 1));
    assert.notEqual(probeKey(link, '/ext/launch_server.py', '0.1.0'), first);
    assert.equal(probeKey(path.join(folder, 'missing'), '/ext/launch_server.py', '0.1.0'), undefined);
  });
});
