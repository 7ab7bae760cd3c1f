// The server's stderr lines reach the output channel at the level the server logged them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import type * as vscode from 'vscode';

import { HeldOutput, levelOf, raceLine } from '../src/serverLog';

test("levelOf: a record's level from its start, a continuation line keeps the record's", () => {
  assert.equal(levelOf('INFO pygls.protocol.json_rpc: request 7 answered with an error: x', 'error'), 'info');
  assert.equal(levelOf('WARNING dsh_session_reference.lsp.live: not watching', 'info'), 'warn');
  assert.equal(levelOf('DEBUG dsh_session_reference.lsp.server: x', 'error'), 'debug');
  assert.equal(levelOf('CRITICAL x: y', 'info'), 'error');
  assert.equal(levelOf('ERROR pygls.protocol.json_rpc: Exception occurred', 'info'), 'error');
  assert.equal(levelOf('Traceback (most recent call last):', 'error'), 'error');
  assert.equal(levelOf('  File "x.py", line 3, in f', 'info'), 'info', "a traceback line is its record's");
  assert.equal(levelOf('KeyError: 3', 'warn'), 'warn');
  assert.equal(levelOf('NOTALEVEL x: y', 'debug'), 'debug');
});

test('raceLine: a request lost to a restart is one info line; any other failure stays an error', () => {
  const lost = 'Request textDocument/codeLens failed.\nError: Starting server failed\n\tat LanguageClient2.$start (extension.js:19486:17)';
  assert.equal(raceLine(lost), 'Request textDocument/codeLens failed: Starting server failed');
  assert.equal(raceLine('Request textDocument/hover failed.\n  Message: Client is not running\n  Code: -32099'), 'Request textDocument/hover failed: Message: Client is not running');
  assert.equal(raceLine('Request textDocument/hover failed.\nError: boom\n\tat x'), undefined);
  assert.equal(raceLine('Server process exited with signal SIGKILL.'), undefined);
});

/** A log output channel that records what reaches it, as `level message`. */
function recordingChannel(): { channel: vscode.LogOutputChannel; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => lines.push(`${level} ${message}`);
  const channel = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), trace: at('trace') };
  return { channel: channel as unknown as vscode.LogOutputChannel, lines };
}

test('HeldOutput: an early client that started writes what it held at its own levels, then writes through', () => {
  const { channel, lines } = recordingChannel();
  const held = new HeldOutput(channel);
  held.channel.warn('WARNING x: no zstd');
  held.channel.error('ERROR y: boom');
  assert.deepEqual(lines, [], 'nothing is written while held');
  assert.equal(held.quiet, true);
  held.release();
  assert.equal(held.quiet, false);
  held.channel.error('later');
  assert.deepEqual(lines, ['warn WARNING x: no zstd', 'error ERROR y: boom', 'error later']);
});

test("HeldOutput: an early client that never started writes everything at debug, its last words too", () => {
  const { channel, lines } = recordingChannel();
  const held = new HeldOutput(channel);
  held.channel.error('SyntaxError: future feature annotations is not defined');
  held.drop();
  held.channel.error('Connection to server got closed.');
  held.release(); // too late: it stays quiet
  held.channel.info('Server process exited with code 1.');
  assert.equal(held.quiet, true);
  assert.deepEqual(lines, [
    'debug SyntaxError: future feature annotations is not defined',
    'debug Connection to server got closed.',
    'debug Server process exited with code 1.',
  ]);
});

test('HeldOutput: a server that writes without end is held to 500 lines, the rest counted', () => {
  const { channel, lines } = recordingChannel();
  const held = new HeldOutput(channel);
  for (let line = 0; line < 600; line += 1) {
    held.channel.info(`line ${line}`);
  }
  held.release();
  assert.equal(lines.length, 501);
  assert.equal(lines[499], 'info line 499');
  assert.equal(lines[500], "warn 100 more lines from the server's start were not kept");
});

test('HeldOutput: a line of megabytes is not held, and counted', () => {
  const { channel, lines } = recordingChannel();
  const held = new HeldOutput(channel);
  held.channel.error('x'.repeat(2 * 1024 * 1024));
  held.channel.error('after it');
  held.release();
  assert.deepEqual(lines, ['error after it', "warn 1 more lines from the server's start were not kept"]);
});
