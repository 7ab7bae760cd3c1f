// The mapping from VS Code settings to the server's `dshSessionReference` settings object (the
// language-server contract in docs/architecture.md). Kept free of `vscode` so it is unit tested.
// Only the nine server settings are sent; the rest (interpreter, documentSelector, trace) are the
// client's own business.
//
// What a repository's own settings (.vscode/settings.json) can reach must be harmless: the budgets,
// bodySearch, the dsh profile, sessionsRoot, interpreter and documentSelector are machine settings
// (package.json), which VS Code ignores in workspace and folder settings, and they are read from
// the user level only (`inspect().globalValue`, user and remote settings), never `get()`'s merge.

import { PathContext, resolveUserPath } from './paths';

export const SECTION = 'dshSessionReference';

export interface ServerSettings {
  /** Absolute path, or '' for the server's default (`$DSH_HOME/sessions` or `~/.dsh/sessions`). */
  readonly sessionsRoot: string;
  /** '' lets the server use `$DSH_SESSION_ID`. */
  readonly targetSessionId: string;
  /** The budgets as the user set them; null: dsh's profile decides (else dsh's default), on the server. */
  readonly maxReferences: number | null;
  readonly candidateLimit: number | null;
  readonly maxReferenceBytes: number | null;
  /** The dsh profile whose budgets apply; '' is `web`. */
  readonly profile: string;
  /** Opt-in: `@` queries also match message text (rows marked "matched in messages"). */
  readonly bodySearch: boolean;
  /** Each mention's cost as an inlay hint after it ("12 msgs · 5.8 / 64 KB"). */
  readonly inlayHints: boolean;
  /** The code lens above the first mention: the prompt's total and "Preview". */
  readonly codeLens: boolean;
}

export const SERVER_DEFAULTS: ServerSettings = {
  sessionsRoot: '',
  targetSessionId: '',
  maxReferences: null,
  candidateLimit: null,
  maxReferenceBytes: null,
  profile: '',
  bodySearch: false,
  inlayHints: true,
  codeLens: true,
};

export const SERVER_KEYS: readonly (keyof ServerSettings)[] = [
  'sessionsRoot',
  'targetSessionId',
  'maxReferences',
  'candidateLimit',
  'maxReferenceBytes',
  'profile',
  'bodySearch',
  'inlayHints',
  'codeLens',
];

/** dsh's own defaults, which package.json shows (the server applies them when nothing else decides). */
export const DSH_BUDGET_DEFAULTS = { maxReferences: 3, candidateLimit: 50, maxReferenceBytes: 65536 } as const;

/** Settings read from the user level only (see the top of this file). */
export const USER_LEVEL_KEYS: readonly string[] = ['maxReferences', 'candidateLimit', 'maxReferenceBytes', 'profile', 'bodySearch', 'documentSelector'];

/** Reads one setting below the section, as `WorkspaceConfiguration.get` does. */
export type SettingReader = (key: string) => unknown;

function stringSetting(read: SettingReader, key: keyof ServerSettings): string {
  const value = read(key);
  return typeof value === 'string' ? value : (SERVER_DEFAULTS[key] as string);
}

// Out-of-range integers are passed on unchanged: the server clamps or rejects them with upstream's
// own configuration message, which is more useful than a silent change here. A value that is not a
// number at all (a hand-edited settings.json), or none, is null: the server's choice.
function budgetSetting(read: SettingReader, key: keyof ServerSettings): number | null {
  const value = read(key);
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function booleanSetting(read: SettingReader, key: keyof ServerSettings): boolean {
  const value = read(key);
  return typeof value === 'boolean' ? value : (SERVER_DEFAULTS[key] as boolean);
}

/**
 * `read` gives a setting as `get` does; `readUser` its user-level value only (undefined when the
 * user did not set it), for the {@link USER_LEVEL_KEYS}.
 */
export function toServerSettings(read: SettingReader, paths: PathContext, readUser: SettingReader = read): ServerSettings {
  return {
    sessionsRoot: resolveUserPath(stringSetting(read, 'sessionsRoot'), paths),
    targetSessionId: stringSetting(read, 'targetSessionId'),
    maxReferences: budgetSetting(readUser, 'maxReferences'),
    candidateLimit: budgetSetting(readUser, 'candidateLimit'),
    maxReferenceBytes: budgetSetting(readUser, 'maxReferenceBytes'),
    profile: stringSetting(readUser, 'profile'),
    bodySearch: booleanSetting(readUser, 'bodySearch'),
    inlayHints: booleanSetting(read, 'inlayHints'),
    codeLens: booleanSetting(read, 'codeLens'),
  };
}

/** The payload of `workspace/didChangeConfiguration`, per the contract. */
export function didChangeConfigurationParams(settings: ServerSettings): { settings: { [SECTION]: ServerSettings } } {
  return { settings: { [SECTION]: settings } };
}

export const DEFAULT_LANGUAGES: readonly string[] = ['markdown', 'plaintext', 'dsh-prompt'];

export interface LanguageFilter {
  readonly scheme: string;
  readonly language: string;
}

/** Saved and unsaved documents of each configured language; an unusable setting means the defaults. */
export function toDocumentSelector(setting: unknown): LanguageFilter[] {
  const languages = Array.isArray(setting)
    ? [...new Set(setting.filter((item): item is string => typeof item === 'string' && item.trim() !== '').map((s) => s.trim()))]
    : [];
  const chosen = languages.length > 0 ? languages : DEFAULT_LANGUAGES;
  return chosen.flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
}

const LOG_LEVELS = ['debug', 'info', 'warning', 'error'] as const;

/** The server's `--log-level` from `dshSessionReference.server.logLevel` (anything else: warning). */
export function serverLogLevel(value: unknown): string {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value) ? value : 'warning';
}
