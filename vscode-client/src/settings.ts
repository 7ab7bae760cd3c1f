// The mapping from VS Code settings to the server's `dshSessionReference` settings object (the
// language-server contract in docs/architecture.md). Kept free of `vscode` so it is unit tested.
// Only the eight server settings are sent; the rest (interpreter, documentSelector, trace) are the
// client's own business.

import { PathContext, resolveUserPath } from './paths';

export const SECTION = 'dshSessionReference';

export interface ServerSettings {
  /** Absolute path, or '' for the server's default (`$DSH_HOME/sessions` or `~/.dsh/sessions`). */
  readonly sessionsRoot: string;
  /** '' lets the server use `$DSH_SESSION_ID`. */
  readonly targetSessionId: string;
  readonly maxReferences: number;
  readonly candidateLimit: number;
  readonly maxReferenceBytes: number;
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
  maxReferences: 3,
  candidateLimit: 50,
  maxReferenceBytes: 65536,
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
  'bodySearch',
  'inlayHints',
  'codeLens',
];

/** Reads one setting below the section, as `WorkspaceConfiguration.get` does. */
export type SettingReader = (key: string) => unknown;

function stringSetting(read: SettingReader, key: keyof ServerSettings): string {
  const value = read(key);
  return typeof value === 'string' ? value : (SERVER_DEFAULTS[key] as string);
}

// Out-of-range integers are passed on unchanged: the server rejects them with upstream's own
// configuration message, which is more useful than a silent clamp. Only values that are not
// numbers at all (a hand-edited settings.json) fall back to the default.
function integerSetting(read: SettingReader, key: keyof ServerSettings): number {
  const value = read(key);
  return typeof value === 'number' && Number.isFinite(value) ? value : (SERVER_DEFAULTS[key] as number);
}

function booleanSetting(read: SettingReader, key: keyof ServerSettings): boolean {
  const value = read(key);
  return typeof value === 'boolean' ? value : (SERVER_DEFAULTS[key] as boolean);
}

export function toServerSettings(read: SettingReader, paths: PathContext): ServerSettings {
  return {
    sessionsRoot: resolveUserPath(stringSetting(read, 'sessionsRoot'), paths),
    targetSessionId: stringSetting(read, 'targetSessionId'),
    maxReferences: integerSetting(read, 'maxReferences'),
    candidateLimit: integerSetting(read, 'candidateLimit'),
    maxReferenceBytes: integerSetting(read, 'maxReferenceBytes'),
    bodySearch: booleanSetting(read, 'bodySearch'),
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
