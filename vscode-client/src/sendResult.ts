// "DSH: Send to dsh" without `vscode` (unit tested): the address it passes, taken from the user's own
// settings only, the server's answer checked on arrival, and what a refusal offers to do next.

/** `dshSessionReference.send`'s answer: where the prompt went and what was sent (the accounting). */
export interface SendResult {
  readonly sent: true;
  /** The dsh web it went to, as `http://127.0.0.1:3080`. */
  readonly dshWebUrl: string;
  readonly sessionId: string;
  /** true: dsh web made a new session in the workspace folder for it (there was no target). */
  readonly created: boolean;
  /** The session in words: `Title (id)`, or `a new session (id) in /folder`. */
  readonly where: string;
  /** The preview's one-line accounting of the message sent. */
  readonly summary: string;
  /** UTF-8 bytes of the text sent (the prompt as dsh's composer sends it: trimmed). */
  readonly bytes: number;
  /** What to tell the user: what was sent (the accounting) first, then the session and the host. */
  readonly message: string;
}

export function asSendResult(value: unknown): SendResult {
  const v = value as Partial<Record<keyof SendResult, unknown>> | null;
  if (
    typeof v !== 'object' || v === null || v.sent !== true || typeof v.dshWebUrl !== 'string' || typeof v.sessionId !== 'string' ||
    typeof v.created !== 'boolean' || typeof v.where !== 'string' || typeof v.summary !== 'string' || typeof v.bytes !== 'number' ||
    typeof v.message !== 'string'
  ) {
    throw new Error(`unexpected answer to dshSessionReference.send: ${JSON.stringify(value)?.slice(0, 200)}`);
  }
  return v as SendResult;
}

/** Why the server did not send (`data.reason` of its RequestFailed answer). */
export type NotSentReason = 'address' | 'empty' | 'errors' | 'no-folder' | 'unreachable' | 'no-answer' | 'dsh';

export function notSentReason(error: unknown): NotSentReason | undefined {
  const data = typeof error === 'object' && error !== null ? (error as { data?: unknown }).data : undefined;
  const reason = typeof data === 'object' && data !== null ? (data as { reason?: unknown }).reason : undefined;
  return typeof reason === 'string' ? (reason as NotSentReason) : undefined;
}

/** The button a refusal offers, with the reason it answers. */
export const NEXT_STEP: Partial<Record<NotSentReason, string>> = {
  errors: 'Show Problems',
  address: 'Open Settings',
  'no-folder': 'Select Target Session',
};

/** What `WorkspaceConfiguration.inspect` gives for a setting (the parts read here). */
export interface Inspected {
  readonly globalValue?: unknown;
  readonly workspaceValue?: unknown;
  readonly workspaceFolderValue?: unknown;
}

/**
 * `dshWebUrl` as the user set it (user or remote settings), never a workspace's value: a workspace
 * that chose the address would receive the prompt and the sessions it mentions. undefined: the
 * server chooses (`$DSH_WEB_URL`, which dsh web sets in its sessions, else 127.0.0.1:3080).
 */
export function userWebUrl(inspected: Inspected | undefined): string | undefined {
  const value = inspected?.globalValue;
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}

/** The time zone dsh's web client sends with a prompt (the browser's; here the editor's). */
export function clientTimeZone(): string | undefined {
  try {
    const zone = new Intl.DateTimeFormat().resolvedOptions().timeZone;
    return typeof zone === 'string' && zone !== '' ? zone : undefined;
  } catch {
    return undefined;
  }
}
