// The server's stderr lines reach the output channel at the level the server logged them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { levelOf, raceLine } from '../src/serverLog';

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
