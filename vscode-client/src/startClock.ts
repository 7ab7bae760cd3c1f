// The start's clock: the first line of the extension's code to run. extension.ts imports this
// before anything else, so the bundle evaluates it before any other module (its own imports come
// first in a bundle): VS Code has begun to activate the extension. The start's figures count from
// here (`ListingRetries`, docs/benchmarks.md), so that work moved ahead of `activate` stays counted.

/** When the extension's code began to run (Date.now()). */
export const loadedAt = Date.now();
