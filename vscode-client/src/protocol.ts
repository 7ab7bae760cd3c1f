// Shapes of the server's executeCommand results (docs/architecture.md, "Language server
// contract"), checked on arrival: a server from another version must produce a clear error,
// not `undefined` in the status bar.

export const SERVER_COMMANDS = {
  preview: 'dshSessionReference.preview',
  modelText: 'dshSessionReference.modelText',
  candidates: 'dshSessionReference.candidates',
  documentSummary: 'dshSessionReference.documentSummary',
  transcript: 'dshSessionReference.transcript',
  insertMention: 'dshSessionReference.insertMention',
  send: 'dshSessionReference.send',
} as const;

/** The `source` of the server's diagnostics. */
export const DIAGNOSTIC_SOURCE = 'dsh-session-reference';

export const PREVIEW_SCHEME = 'dsh-preview';
/** Read-only transcripts of sessions: `dsh-transcript:/<title>.txt?<percent-encoded id>`. */
export const TRANSCRIPT_SCHEME = 'dsh-transcript';

/** The server's notification that virtual documents it served may read differently now. */
export const CONTENT_CHANGED_NOTIFICATION = 'dshSessionReference/contentChanged';

/** LSP's `RequestCancelled`: the server answers so a request it dropped, as when it shuts down. */
export const REQUEST_CANCELLED = -32800;

/** Whether a request failed only because the server cancelled it (not because it is wrong). */
export function isRequestCancelled(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === REQUEST_CANCELLED;
}

/**
 * The extension's own command ids. vscode-languageclient registers every id the server lists in
 * `executeCommandProvider` as a VS Code command, so none of these may equal a SERVER_COMMANDS id.
 */
export const CLIENT_COMMANDS = {
  previewContext: 'dshSessionReference.previewContext',
  showModelText: 'dshSessionReference.showModelText',
  selectTarget: 'dshSessionReference.selectTarget',
  insertMention: 'dshSessionReference.insertMentionFromPicker',
  goToSession: 'dshSessionReference.goToSession',
  restartServer: 'dshSessionReference.restartServer',
  showOutput: 'dshSessionReference.showOutput',
  sendToDsh: 'dshSessionReference.sendToDsh',
} as const;

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
  /** The cwd's last folder as a row shows it (`terraform`), null without a cwd. */
  readonly project: string | null;
  readonly createdAt: unknown;
  readonly mention: string;
  /** The session's `dsh-transcript:` URI, what Go to Definition on a mention of it opens. */
  readonly transcript?: string;
}

export interface DocumentSummary {
  readonly mentions: number;
  readonly sessions: number;
  readonly errors: number;
  /** null while the document has errors: dsh would not send it, so it has no size. */
  readonly bytes: number | null;
  readonly tokens: number | null;
  /** true when `tokens` is DeepSeek's own count (the server has the `tokens` extra); else an estimate. */
  readonly tokensExact?: boolean;
  /**
   * The session the document is written for, as the server resolved it (setting, else
   * $DSH_SESSION_ID), with its title; null for none; undefined from servers that do not say.
   */
  readonly target?: Target | null;
  /** The most distinct sessions the server lets a message reference (its own, checked, setting). */
  readonly maxReferences?: number;
  /** The sessions referenced within that limit, in prepare's order; undefined from older servers. */
  readonly references?: readonly ReferencedSession[];
}

export interface ReferencedSession {
  readonly sessionId: string;
  /** Its title (else the first mention's label), shortened by the server. */
  readonly label: string;
  /** How many times the document mentions it. */
  readonly mentions: number;
}

export interface Target {
  readonly sessionId: string;
  /** The session's title as the candidate list shows it; its id when untitled or not found. */
  readonly label: string;
  /** false when the sessions root does not list the target (a typo, another root). */
  readonly found: boolean;
}

export interface TranscriptResult {
  readonly uri: string;
  readonly text: string;
  readonly title: string;
}

export interface InsertMentionResult {
  /** The canonical mention the server inserted (or would have). */
  readonly mention: string;
  /** Whether the client applied the server's `workspace/applyEdit`. */
  readonly applied: boolean;
  /** With `replace`: how many mentions of the replaced session became this mention. */
  readonly replaced?: number;
}

/** A range in LSP's terms (UTF-16 positions, as VS Code counts them). */
export interface LspRange {
  readonly start: { readonly line: number; readonly character: number };
  readonly end: { readonly line: number; readonly character: number };
}

export class ProtocolError extends Error {
  constructor(command: string, detail: string) {
    super(`unexpected reply to ${command}: ${detail}`);
    this.name = 'ProtocolError';
  }
}

/**
 * Whether a completion answer is only the server's "Listing dsh sessions…" row (its `data` is
 * `{listing: true}`): the sessions are still being listed, and the extension asks again shortly
 * rather than wait for the user's next keystroke.
 */
export function isListingOnly(result: unknown): boolean {
  const items = Array.isArray(result) ? result : isRecord(result) && Array.isArray(result.items) ? result.items : [];
  return items.length === 1 && isRecord(items[0]) && isRecord(items[0].data) && items[0].data.listing === true;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function asPreviewResult(value: unknown, command: string = SERVER_COMMANDS.preview): PreviewResult {
  if (!isRecord(value) || typeof value.uri !== 'string' || typeof value.text !== 'string') {
    throw new ProtocolError(command, 'expected {uri, text, summary, ok}');
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
      throw new ProtocolError(SERVER_COMMANDS.candidates, 'expected {sessionId, label, cwd, project, createdAt, mention, transcript}');
    }
    return {
      sessionId: item.sessionId,
      label: typeof item.label === 'string' && item.label !== '' ? item.label : item.sessionId,
      cwd: typeof item.cwd === 'string' ? item.cwd : null,
      project: typeof item.project === 'string' && item.project !== '' ? item.project : null,
      createdAt: item.createdAt,
      mention: typeof item.mention === 'string' ? item.mention : '',
      ...(typeof item.transcript === 'string' && item.transcript.startsWith(`${TRANSCRIPT_SCHEME}:`) ? { transcript: item.transcript } : {}),
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
    ...(value.tokensExact === true ? { tokensExact: true } : {}),
    ...('target' in value ? { target: asTarget(value.target) } : {}),
    ...(typeof value.maxReferences === 'number' ? { maxReferences: value.maxReferences } : {}),
    ...(Array.isArray(value.references) ? { references: value.references.flatMap(asReferencedSession) } : {}),
  };
}

function asReferencedSession(value: unknown): ReferencedSession[] {
  if (!isRecord(value) || typeof value.sessionId !== 'string') {
    return [];
  }
  return [
    {
      sessionId: value.sessionId,
      label: typeof value.label === 'string' && value.label !== '' ? value.label : value.sessionId,
      mentions: typeof value.mentions === 'number' ? value.mentions : 1,
    },
  ];
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

export function asTranscriptResult(value: unknown): TranscriptResult {
  if (!isRecord(value) || typeof value.text !== 'string') {
    throw new ProtocolError(SERVER_COMMANDS.transcript, 'expected {uri, text, title}');
  }
  return {
    uri: typeof value.uri === 'string' ? value.uri : '',
    text: value.text,
    title: typeof value.title === 'string' ? value.title : '',
  };
}

export function asInsertMentionResult(value: unknown): InsertMentionResult {
  if (!isRecord(value) || typeof value.mention !== 'string' || typeof value.applied !== 'boolean') {
    throw new ProtocolError(SERVER_COMMANDS.insertMention, 'expected {mention, applied}');
  }
  return {
    mention: value.mention,
    applied: value.applied,
    ...(typeof value.replaced === 'number' ? { replaced: value.replaced } : {}),
  };
}

function isPosition(value: unknown): value is { line: number; character: number } {
  return isRecord(value) && Number.isInteger(value.line) && Number.isInteger(value.character);
}

/**
 * The ranges of the server's `textDocument/documentLink` reply that lead to a session's
 * transcript: the server links exactly the mentions of sessions the sessions root lists, each
 * link over the whole mention. Links of any other kind, and malformed entries, are left out.
 */
export function transcriptLinkRanges(value: unknown): LspRange[] {
  return linksOf(value)
    .filter((link) => link.target?.startsWith(`${TRANSCRIPT_SCHEME}:`) === true)
    .map((link) => link.range);
}

/**
 * The ranges of every link in the server's `textDocument/documentLink` reply, a link it sends
 * without its target (resolved when followed: a long target, a misleading label) included:
 * each covers a mention the server links. Malformed entries are left out.
 */
export function linkedRanges(value: unknown): LspRange[] {
  return linksOf(value).map((link) => link.range);
}

function linksOf(value: unknown): { range: LspRange; target: string | undefined }[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.flatMap((link): { range: LspRange; target: string | undefined }[] => {
    if (!isRecord(link) || !isRecord(link.range) || (link.target !== undefined && link.target !== null && typeof link.target !== 'string')) {
      return [];
    }
    const { start, end } = link.range;
    const target = typeof link.target === 'string' ? link.target : undefined;
    return isPosition(start) && isPosition(end) ? [{ range: { start: { line: start.line, character: start.character }, end: { line: end.line, character: end.character } }, target }] : [];
  });
}

/**
 * The URIs a `dshSessionReference/contentChanged` notification names, split by what the client
 * does with them: transcripts are fetched again, previews prepared again. Anything else (a
 * malformed notification, a scheme this client does not serve) is ignored: the notification is
 * a hint, never an error.
 */
export function changedContent(params: unknown): { transcripts: string[]; previews: string[] } {
  const uris = isRecord(params) && Array.isArray(params.uris) ? params.uris.filter((uri): uri is string => typeof uri === 'string') : [];
  const unique = [...new Set(uris)];
  return {
    transcripts: unique.filter((uri) => uri.startsWith(`${TRANSCRIPT_SCHEME}:`)),
    previews: unique.filter((uri) => uri.startsWith(`${PREVIEW_SCHEME}:`)),
  };
}

/** The name ending of a preview of the exact model-facing text (the server's `MODEL_TEXT_SUFFIX`). */
const MODEL_TEXT_SUFFIX = ' (model text).txt';

/**
 * The prompt a `dsh-preview:` URI was made for (its query, percent-encoded by the server's
 * `preview_uri`), or undefined for any other URI. Each preview names its prompt, so a preview
 * VS Code restores after a reload finds its prompt again without anything remembered here.
 */
export function promptOfPreview(previewUri: string): string | undefined {
  if (!previewUri.startsWith(`${PREVIEW_SCHEME}:`)) {
    return undefined;
  }
  const query = previewUri.indexOf('?');
  if (query < 0 || query === previewUri.length - 1) {
    return undefined;
  }
  const end = previewUri.indexOf('#', query);
  try {
    return decodeURIComponent(previewUri.slice(query + 1, end < 0 ? undefined : end));
  } catch {
    return undefined; // not percent-encoding the server wrote
  }
}

/** Whether a `dsh-preview:` URI shows the exact model-facing text rather than the readable context. */
export function isModelTextPreview(previewUri: string): boolean {
  const query = previewUri.indexOf('?');
  const path = query < 0 ? previewUri : previewUri.slice(0, query);
  try {
    return decodeURIComponent(path).endsWith(MODEL_TEXT_SUFFIX);
  } catch {
    return false;
  }
}
