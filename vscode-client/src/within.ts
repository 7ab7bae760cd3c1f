// Whether a promise settles within a time, without dropping it: the completion middleware shows its
// own row when the server is slow to answer, and still takes the answer when it comes
// (listingRetries.ts). Free of `vscode`, so the Node tests run it.

/** What `within` gives for a promise that had not settled in time. */
export const LATE: unique symbol = Symbol('late');

/**
 * `promise`'s value if it settles within `ms`, else `LATE` (the promise goes on; a rejection
 * within `ms` rejects this too).
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof LATE> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
