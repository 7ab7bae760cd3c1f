// Shapes of the server's executeCommand results (docs/architecture.md, "Language server
// contract"), checked on arrival: a server from another version must produce a clear error,
// not `undefined` in the status bar.

export const SERVER_COMMANDS = {
  preview: 'dshSessionReference.preview',
  candidates: 'dshSessionReference.candidates',
  documentSummary: 'dshSessionReference.documentSummary',
} as const;

export const PREVIEW_SCHEME = 'dsh-preview';

export interface PreviewResult {
  readonly uri: string;
  readonly text: string;
  readonly summary: string;
  readonly ok: boolean;
}

export interface Candidate {
  readonly sessionId: string;
  readonly label: string;
  readonly cwd: string | null;
  readonly createdAt: unknown;
  readonly mention: string;
}

export interface DocumentSummary {
  readonly mentions: number;
  readonly sessions: number;
  readonly errors: number;
  /** null while the document has errors: dsh would not send it, so it has no size. */
  readonly bytes: number | null;
  readonly tokens: number | null;
  /**
   * The session the document is written for, as the server resolved it (setting, else
   * $DSH_SESSION_ID), with its title; null for none; undefined from servers that do not say.
   */
  readonly target?: Target | null;
}

export interface Target {
  readonly sessionId: string;
  /** The session's title as the candidate list shows it; its id when untitled or not found. */
  readonly label: string;
  /** false when the sessions root does not list the target (a typo, another root). */
  readonly found: boolean;
}

export class ProtocolError extends Error {
  constructor(command: string, detail: string) {
    super(`unexpected reply to ${command}: ${detail}`);
    this.name = 'ProtocolError';
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function asPreviewResult(value: unknown): PreviewResult {
  if (!isRecord(value) || typeof value.uri !== 'string' || typeof value.text !== 'string') {
    throw new ProtocolError(SERVER_COMMANDS.preview, 'expected {uri, text, summary, ok}');
  }
  return {
    uri: value.uri,
    text: value.text,
    summary: typeof value.summary === 'string' ? value.summary : '',
    ok: value.ok !== false,
  };
}

export function asCandidates(value: unknown): Candidate[] {
  if (!Array.isArray(value)) {
    throw new ProtocolError(SERVER_COMMANDS.candidates, 'expected a list');
  }
  return value.map((item) => {
    if (!isRecord(item) || typeof item.sessionId !== 'string') {
      throw new ProtocolError(SERVER_COMMANDS.candidates, 'expected {sessionId, label, cwd, createdAt, mention}');
    }
    return {
      sessionId: item.sessionId,
      label: typeof item.label === 'string' && item.label !== '' ? item.label : item.sessionId,
      cwd: typeof item.cwd === 'string' ? item.cwd : null,
      createdAt: item.createdAt,
      mention: typeof item.mention === 'string' ? item.mention : '',
    };
  });
}

export function asDocumentSummary(value: unknown): DocumentSummary {
  const counts = ['mentions', 'sessions', 'errors'] as const;
  const sizes = ['bytes', 'tokens'] as const;
  if (
    !isRecord(value) ||
    !counts.every((key) => typeof value[key] === 'number') ||
    !sizes.every((key) => typeof value[key] === 'number' || value[key] === null)
  ) {
    throw new ProtocolError(SERVER_COMMANDS.documentSummary, 'expected {mentions, sessions, errors, bytes, tokens}');
  }
  return {
    mentions: value.mentions as number,
    sessions: value.sessions as number,
    errors: value.errors as number,
    bytes: value.bytes as number | null,
    tokens: value.tokens as number | null,
    ...('target' in value ? { target: asTarget(value.target) } : {}),
  };
}

function asTarget(value: unknown): DocumentSummary['target'] {
  if (!isRecord(value) || typeof value.sessionId !== 'string') {
    return null;
  }
  return {
    sessionId: value.sessionId,
    label: typeof value.label === 'string' && value.label !== '' ? value.label : value.sessionId,
    // Servers that do not say whether they found it only ever named listed sessions.
    found: value.found !== false,
  };
}
