// The settings mapping: what the server receives for what the user wrote, and that the
// contributed settings in package.json agree with the defaults the client and server assume.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { expandVariables } from '../src/paths';
import {
  didChangeConfigurationParams,
  DSH_BUDGET_DEFAULTS,
  SERVER_DEFAULTS,
  SERVER_KEYS,
  serverLogLevel,
  toDocumentSelector,
  toServerSettings,
  USER_LEVEL_KEYS,
} from '../src/settings';

const paths = { home: '/home/ada', workspaceFolder: '/work/project', env: { DSH_HOME: '/opt/dsh' } };

function reader(values: Record<string, unknown>): (key: string) => unknown {
  return (key) => values[key];
}

const manifest = JSON.parse(readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8')) as {
  contributes: { configuration: { properties: Record<string, { default: unknown; markdownDescription?: string; description?: string; scope?: string; maximum?: number }> } };
  capabilities: { untrustedWorkspaces: { restrictedConfigurations: string[] } };
};

describe('toServerSettings', () => {
  test('unset settings are the server defaults', () => {
    assert.deepEqual(toServerSettings(reader({}), paths), SERVER_DEFAULTS);
  });

  test('sends exactly the nine server settings', () => {
    const settings = toServerSettings(reader({ interpreter: '/usr/bin/python3', documentSelector: ['markdown'] }), paths);
    assert.deepEqual(Object.keys(settings).sort(), [...SERVER_KEYS].sort());
  });

  test('expands and anchors sessionsRoot, keeps empty as "use the default"', () => {
    const cases: [string, string][] = [
      ['', ''],
      ['   ', ''],
      ['~/.dsh/sessions', '/home/ada/.dsh/sessions'],
      ['${workspaceFolder}/fixtures/store', '/work/project/fixtures/store'],
      ['${env:DSH_HOME}/sessions', '/opt/dsh/sessions'],
      ['${userHome}/s', '/home/ada/s'],
      ['store', '/work/project/store'],
      ['../elsewhere', '/work/elsewhere'],
      ['/abs/root', '/abs/root'],
    ];
    for (const [value, expected] of cases) {
      assert.equal(toServerSettings(reader({ sessionsRoot: value }), paths).sessionsRoot, expected, value);
    }
    const noFolder = { home: '/home/ada', env: {} };
    assert.equal(toServerSettings(reader({ sessionsRoot: 'store' }), noFolder).sessionsRoot, '/home/ada/store');
  });

  test('passes numbers through unchanged so the server can clamp or report out-of-range values', () => {
    const settings = toServerSettings(reader({ maxReferences: 7, candidateLimit: 0, maxReferenceBytes: 1024 }), paths);
    assert.equal(settings.maxReferences, 7);
    assert.equal(settings.candidateLimit, 0);
    assert.equal(settings.maxReferenceBytes, 1024);
  });

  test('values of the wrong type fall back to the defaults', () => {
    const settings = toServerSettings(
      reader({ sessionsRoot: 42, targetSessionId: null, maxReferences: '2', candidateLimit: Number.NaN, maxReferenceBytes: {}, bodySearch: 'yes', inlayHints: 0, codeLens: 'off' }),
      paths,
    );
    assert.deepEqual(settings, SERVER_DEFAULTS);
  });

  test('bodySearch is sent under the name the server reads, off unless turned on', () => {
    assert.equal(toServerSettings(reader({}), paths).bodySearch, false);
    assert.equal(toServerSettings(reader({ bodySearch: true }), paths).bodySearch, true);
    const pushed = didChangeConfigurationParams(toServerSettings(reader({ bodySearch: true }), paths));
    assert.equal(pushed.settings.dshSessionReference.bodySearch, true);
    const property = manifest.contributes.configuration.properties['dshSessionReference.bodySearch'];
    assert.equal((property as { type?: string }).type, 'boolean');
    assert.match(property.markdownDescription ?? '', /matched in messages/);
  });

  test('inlayHints and codeLens are on unless turned off, and reach the server under those names', () => {
    assert.equal(toServerSettings(reader({}), paths).inlayHints, true);
    assert.equal(toServerSettings(reader({}), paths).codeLens, true);
    const off = didChangeConfigurationParams(toServerSettings(reader({ inlayHints: false, codeLens: false }), paths));
    assert.equal(off.settings.dshSessionReference.inlayHints, false);
    assert.equal(off.settings.dshSessionReference.codeLens, false);
    const properties = manifest.contributes.configuration.properties;
    assert.equal((properties['dshSessionReference.inlayHints'] as { type?: string }).type, 'boolean');
    assert.equal((properties['dshSessionReference.codeLens'] as { type?: string }).type, 'boolean');
    assert.match(properties['dshSessionReference.inlayHints'].markdownDescription ?? '', /messages kept and bytes against the budget/);
  });

  test('the target session id is sent verbatim (ids may hold any characters)', () => {
    const id = ' sess/../with spaces ';
    assert.equal(toServerSettings(reader({ targetSessionId: id }), paths).targetSessionId, id);
  });

  test('didChangeConfiguration wraps the settings in the section, as the contract says', () => {
    const settings = toServerSettings(reader({ maxReferences: 2 }), paths);
    assert.deepEqual(didChangeConfigurationParams(settings), { settings: { dshSessionReference: settings } });
  });

  test('package.json contributes every server setting with the same default and a description', () => {
    const properties = manifest.contributes.configuration.properties;
    for (const key of SERVER_KEYS) {
      const property = properties[`dshSessionReference.${key}`];
      assert.ok(property, `missing contribution for ${key}`);
      const shown = key in DSH_BUDGET_DEFAULTS ? DSH_BUDGET_DEFAULTS[key as keyof typeof DSH_BUDGET_DEFAULTS] : SERVER_DEFAULTS[key];
      assert.deepEqual(property.default, shown, key);
      assert.ok((property.markdownDescription ?? property.description ?? '').length > 20, `${key} needs a description`);
    }
    for (const key of ['interpreter', 'documentSelector', 'trace.server']) {
      assert.ok(properties[`dshSessionReference.${key}`], `missing contribution for ${key}`);
    }
  });
});

describe('what a workspace may set', () => {
  test('a budget, the profile, bodySearch and documentSelector are read from the user level only', () => {
    // `get` merges workspace settings; these come from `readUser` (inspect().globalValue) alone.
    const workspace = reader({ maxReferences: 3, candidateLimit: 9007199254740991, maxReferenceBytes: 9007199254740991, profile: 'evil', bodySearch: true });
    const settings = toServerSettings(workspace, paths, reader({ maxReferenceBytes: 131072 }));
    assert.equal(settings.maxReferenceBytes, 131072);
    assert.equal(settings.candidateLimit, null); // the server's choice: dsh's profile, else 50
    assert.equal(settings.maxReferences, null);
    assert.equal(settings.profile, '');
    assert.equal(settings.bodySearch, false);
  });

  test('every user-level setting is a machine setting and restricted in untrusted workspaces', () => {
    const properties = manifest.contributes.configuration.properties;
    const restricted = manifest.capabilities.untrustedWorkspaces.restrictedConfigurations;
    for (const key of [...USER_LEVEL_KEYS, 'sessionsRoot', 'interpreter']) {
      assert.equal(properties[`dshSessionReference.${key}`].scope, 'machine', key);
      assert.ok(restricted.includes(`dshSessionReference.${key}`), key);
    }
    assert.equal(properties['dshSessionReference.candidateLimit'].maximum, 1000);
    assert.equal(properties['dshSessionReference.maxReferenceBytes'].maximum, 1048576);
  });
});

describe('toDocumentSelector', () => {
  test('defaults to Markdown, plain text and DSH prompts, saved and unsaved', () => {
    const selector = toDocumentSelector(undefined);
    assert.deepEqual(
      selector.map((filter) => `${filter.scheme}:${filter.language}`),
      ['file:markdown', 'untitled:markdown', 'file:plaintext', 'untitled:plaintext', 'file:dsh-prompt', 'untitled:dsh-prompt'],
    );
    const manifestDefault = manifest.contributes.configuration.properties['dshSessionReference.documentSelector'].default;
    assert.deepEqual(toDocumentSelector(manifestDefault), selector);
  });

  test('takes the configured languages, deduplicated, and ignores junk', () => {
    const selector = toDocumentSelector(['dsh-prompt', ' dsh-prompt ', 3, '', 'latex']);
    assert.deepEqual([...new Set(selector.map((filter) => filter.language))], ['dsh-prompt', 'latex']);
  });

  test('an empty or malformed setting means the defaults, never "no documents"', () => {
    assert.deepEqual(toDocumentSelector([]), toDocumentSelector(undefined));
    assert.deepEqual(toDocumentSelector('markdown'), toDocumentSelector(undefined));
  });
});

describe('expandVariables', () => {
  test('leaves ${workspaceFolder} alone when there is no folder, so the path visibly fails', () => {
    assert.equal(expandVariables('${workspaceFolder}/x', { home: '/h', env: {} }), '${workspaceFolder}/x');
  });

  test('an unknown environment variable expands to nothing, like VS Code', () => {
    assert.equal(expandVariables('${env:NOPE}/x', { home: '/h', env: {} }), '/x');
  });

  test('only a leading ~ is the home folder', () => {
    assert.equal(expandVariables('~', paths), '/home/ada');
    assert.equal(expandVariables('a/~/b', paths), 'a/~/b');
    assert.equal(expandVariables('~other/x', paths), '~other/x');
  });
});

describe('serverLogLevel', () => {
  test('passes a known level and falls back to warning for anything else', () => {
    assert.equal(serverLogLevel('debug'), 'debug');
    assert.equal(serverLogLevel('error'), 'error');
    assert.equal(serverLogLevel('LOUD'), 'warning');
    assert.equal(serverLogLevel(undefined), 'warning');
  });
});
