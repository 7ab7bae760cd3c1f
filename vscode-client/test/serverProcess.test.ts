// The server's process as the extension owns it (a process spawned before `activate`, handed to
// the client, ended by the controller), against real processes: Node itself stands in for the
// interpreter.

import assert from 'node:assert/strict';
import { ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import { after, describe, test } from 'node:test';

import { EarlyServer, ended, exited, running, sameSpec, serverArgs, spawnServer, SpawnSpec } from '../src/serverProcess';

const spawned: ChildProcess[] = [];

/** A Node process running `script`, as the server would be spawned. */
function node(script: string, cwd = os.tmpdir()): { spec: SpawnSpec; child: ChildProcess } {
  const spec: SpawnSpec = { command: process.execPath, args: ['-e', script], cwd };
  const child = spawnServer(spec);
  spawned.push(child);
  return { spec, child };
}

/** Runs until killed, whatever signal asks it to stop politely. */
const STUBBORN = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);";

function exit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (!running(child)) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

function stdout(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    child.stdout?.on('end', () => resolve(text));
  });
}

after(() => {
  for (const child of spawned) {
    child.kill('SIGKILL');
  }
});

describe('spawn specs', () => {
  test('the launcher runs the language server at the log level', () => {
    assert.deepEqual(serverArgs('/ext/python/launch_server.py', 'info'), ['/ext/python/launch_server.py', 'lsp', '--log-level', 'info']);
  });

  test('the same interpreter, arguments and folder are the same spec; any difference is not', () => {
    const spec: SpawnSpec = { command: '/usr/bin/python3', args: serverArgs('/ext/launch.py', 'info'), cwd: '/ext' };
    assert.ok(sameSpec(spec, { ...spec, args: [...spec.args] }));
    assert.ok(!sameSpec(spec, { ...spec, command: '/venv/bin/python' }));
    assert.ok(!sameSpec(spec, { ...spec, args: serverArgs('/ext/launch.py', 'debug') }));
    assert.ok(!sameSpec(spec, { ...spec, args: spec.args.slice(0, 2) }));
    assert.ok(!sameSpec(spec, { ...spec, cwd: '/elsewhere' }));
  });
});

describe('spawnServer', () => {
  test('runs the command in the folder, unbuffered, over pipes', async () => {
    const { child } = node("console.log(JSON.stringify([process.env.PYTHONUNBUFFERED, process.cwd()]))");
    assert.deepEqual(JSON.parse(await stdout(child)), ['1', await import('node:fs').then((fs) => fs.realpathSync(os.tmpdir()))]);
  });

  test('a command that does not exist is reported, not thrown', async () => {
    const errors: Error[] = [];
    const child = spawnServer({ command: '/nonexistent/python3', args: [], cwd: os.tmpdir() }, (error) => errors.push(error));
    assert.equal(child.pid, undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.match(String(errors[0]), /ENOENT/);
    assert.equal(running(child), false);
  });
});

describe('EarlyServer', () => {
  test('the start with the same spec takes the running process, once, with what it wrote meanwhile', async () => {
    const { spec, child } = node("process.stdout.write('ready\\n'); process.stdin.on('data', () => {}); process.stdin.on('end', () => process.exit(0));");
    const early = new EarlyServer(spec, child, Date.now());
    await new Promise((resolve) => setTimeout(resolve, 300)); // it has written before anyone reads
    const taken = early.take({ ...spec, args: [...spec.args] });
    assert.equal(taken, child);
    assert.equal(early.take(spec), undefined);
    const text = stdout(child);
    child.stdin?.end();
    assert.equal(await text, 'ready\n');
    assert.deepEqual(await exit(child), { code: 0, signal: null });
  });

  test('a start with another interpreter or log level has it killed', async () => {
    const { spec, child } = node(STUBBORN);
    const early = new EarlyServer(spec, child, Date.now());
    assert.equal(early.take({ ...spec, command: '/usr/bin/python3' }), undefined);
    assert.deepEqual(await exit(child), { code: null, signal: 'SIGKILL' });
  });

  test('a process that has already exited is not handed out', async () => {
    const { spec, child } = node('process.exit(3)');
    const early = new EarlyServer(spec, child, Date.now());
    await exit(child);
    assert.equal(early.take(spec), undefined);
  });

  test('discarded (no start wants it: no interpreter, a probe with problems), it is killed', async () => {
    const { spec, child } = node(STUBBORN);
    const early = new EarlyServer(spec, child, Date.now());
    early.discard();
    assert.deepEqual(await exit(child), { code: null, signal: 'SIGKILL' });
    assert.equal(early.take(spec), undefined);
  });
});

describe('ending a server', () => {
  test('a server that exits when asked is waited for, not killed', async () => {
    const { child } = node("process.stdin.on('end', () => setTimeout(() => process.exit(0), 100)); process.stdin.resume();");
    child.stdin?.end();
    await ended(child, 5000);
    assert.deepEqual({ code: child.exitCode, signal: child.signalCode }, { code: 0, signal: null });
  });

  test('a server that does not exit within the grace time is killed', async () => {
    const { child } = node(STUBBORN);
    const began = Date.now();
    await ended(child, 300);
    assert.equal(child.signalCode, 'SIGKILL');
    assert.ok(Date.now() - began >= 290, 'killed before its grace time');
  });

  test('exited resolves at once for no process or one that has exited, else by the timeout', async () => {
    await exited(undefined, 60_000);
    const { child } = node('process.exit(0)');
    await exit(child);
    await exited(child, 60_000);
    const stubborn = node(STUBBORN).child;
    const began = Date.now();
    await exited(stubborn, 200);
    assert.ok(running(stubborn) && Date.now() - began >= 190);
  });
});
