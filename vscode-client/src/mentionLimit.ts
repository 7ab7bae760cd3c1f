// What the insert picker says about `maxReferences`: how many distinct sessions the prompt
// references already, whether a pick would be one too many, and what it offers instead (to put
// the pick in place of a session the prompt references). The counts are the server's
// (`documentSummary`'s `references` and `maxReferences`), so the picker and the diagnostics never
// disagree. Pure, so the wording is unit tested.

import { plural } from './format';
import type { DocumentSummary, ReferencedSession } from './protocol';

export interface MentionLimit {
  /** The sessions the prompt references within the limit, in prepare's order. */
  readonly referenced: readonly ReferencedSession[];
  readonly max: number;
}

/** The limit as the server counts it; undefined from a server that does not say (no warning then). */
export function mentionLimit(summary: DocumentSummary | undefined): MentionLimit | undefined {
  if (summary?.references === undefined || summary.maxReferences === undefined) {
    return undefined;
  }
  return { referenced: summary.references, max: summary.maxReferences };
}

/** No room for one more distinct session. */
export function isFull(limit: MentionLimit): boolean {
  return limit.referenced.length >= limit.max;
}

/** Whether mentioning `sessionId` would take the prompt past the limit (a session it references already adds nothing). */
export function wouldExceed(limit: MentionLimit | undefined, sessionId: string): boolean {
  return limit !== undefined && isFull(limit) && !limit.referenced.some((session) => session.sessionId === sessionId);
}

export function isReferenced(limit: MentionLimit | undefined, sessionId: string): boolean {
  return limit?.referenced.some((session) => session.sessionId === sessionId) ?? false;
}

const PICKER = 'DSH: Insert session mention';

/** The picker's title: the count against the limit, always in sight. */
export function pickerTitle(limit: MentionLimit | undefined): string {
  return limit === undefined ? PICKER : `${PICKER} (${limit.referenced.length} of ${plural(limit.max, 'session')} referenced)`;
}

/** The picker's placeholder: what to type, and what a pick does when the prompt is full. */
export function pickerPlaceholder(limit: MentionLimit | undefined): string {
  if (limit !== undefined && isFull(limit)) {
    return (
      `Type a title, id or folder. This prompt references ${plural(limit.max, 'session')}, the most a message may: ` +
      'picking another offers to replace one'
    );
  }
  return 'Type a title, id or folder: the session to mention at the cursor';
}

export interface ReplaceChoice {
  readonly label: string;
  readonly description: string;
  readonly detail?: string;
  /** The session to replace; undefined for "Cancel". */
  readonly replace?: string;
}

/** The question a pick past the limit asks: which referenced session it replaces, or none. */
export function replaceQuestion(limit: MentionLimit, picked: string): { title: string; choices: ReplaceChoice[] } {
  return {
    title: `“${picked}” would be session ${limit.referenced.length + 1}: a message may reference at most ${plural(limit.max, 'session')}`,
    choices: [
      ...limit.referenced.map((session) => ({
        label: `$(replace) Replace “${session.label}”`,
        description: plural(session.mentions, 'mention'),
        detail: `${session.mentions === 1 ? 'Its mention becomes a mention' : 'Its mentions become mentions'} of “${picked}”`,
        replace: session.sessionId,
      })),
      { label: '$(close) Cancel', description: 'leave the prompt as it is' },
    ],
  };
}
