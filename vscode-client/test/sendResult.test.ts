// "DSH: Send to dsh" without VS Code: the address comes from user settings only, the answer is
// checked, a refusal's reason is read, and the contribution keeps workspaces out.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { asSendResult, clientTimeZone, notSentReason, userWebUrl } from '../src/sendResult';

const manifest = JSON.parse(readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8')) as {
  capabilities: { untrustedWorkspaces: { restrictedConfigurations: string[] } };
  contributes: { configuration: { properties: Record<string, { default: unknown; scope?: string }> } };
};

const answer = {
  sent: true,
  dshWebUrl: 'http://127.0.0.1:3080',
  sessionId: 's-alpha',
  created: false,
  where: 'Refactor the parser (s-alpha)',
  summary: '1 session referenced; 1.2 KB in all, ~300 tokens (estimate); snapshot 1.1 KB',
  bytes: 40,
  message: 'Sent to dsh: 1 session referenced; 1.2 KB in all, ~300 tokens (estimate); snapshot 1.1 KB. Session: Refactor the parser (s-alpha), at http://127.0.0.1:3080.',
};

describe('dshWebUrl', () => {
  test("only the user's (or remote machine's) value is passed; a workspace's never", () => {
    assert.equal(userWebUrl({ globalValue: 'http://127.0.0.1:4000' }), 'http://127.0.0.1:4000');
    assert.equal(userWebUrl({ workspaceValue: 'http://127.0.0.1:6666', workspaceFolderValue: 'http://127.0.0.1:6667' }), undefined);
    assert.equal(userWebUrl({ globalValue: ' ', workspaceValue: 'http://127.0.0.1:6666' }), undefined);
    assert.equal(userWebUrl(undefined), undefined);
  });

  test('is contributed machine-scoped, restricted in untrusted workspaces, empty by default', () => {
    const property = manifest.contributes.configuration.properties['dshSessionReference.dshWebUrl'];
    assert.equal(property.scope, 'machine');
    assert.equal(property.default, '');
    assert.ok(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations.includes('dshSessionReference.dshWebUrl'));
  });
});

describe('the answer', () => {
  test('of another shape is an error that shows it', () => {
    assert.throws(() => asSendResult({ ...answer, sent: false }), /unexpected answer to dshSessionReference.send/);
    assert.throws(() => asSendResult(null), /unexpected answer/);
    assert.throws(() => asSendResult({ ...answer, message: undefined }), /unexpected answer/);
    assert.equal(asSendResult(answer).message, answer.message);
  });

  test("a refusal's reason is its data.reason", () => {
    assert.equal(notSentReason({ message: 'Not sent: …', data: { reason: 'errors', errors: 2 } }), 'errors');
    assert.equal(notSentReason(new Error('server not running')), undefined);
  });

  test('the time zone is an IANA name, as the browser gives it', () => {
    const zone = clientTimeZone();
    assert.ok(zone === undefined || /^(UTC|[A-Za-z_]+(\/[A-Za-z0-9_+-]+)+)$/.test(zone), zone);
  });
});
