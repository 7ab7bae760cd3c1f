// Bounded restarts after server crashes: a crash loop (a broken interpreter, a bad install) must
// end in one message instead of an endless flicker of restarts. Pure so it is unit tested with a
// fake clock.

export interface RestartDecision {
  readonly restart: boolean;
  /** Crashes counted inside the window, including this one. */
  readonly crashes: number;
}

export class RestartPolicy {
  private crashTimes: number[] = [];

  constructor(
    readonly maxRestarts: number,
    readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a crash and says whether another restart is allowed. */
  crashed(): RestartDecision {
    const now = this.now();
    this.crashTimes = this.crashTimes.filter((time) => now - time < this.windowMs);
    this.crashTimes.push(now);
    return { restart: this.crashTimes.length <= this.maxRestarts, crashes: this.crashTimes.length };
  }

  /** A deliberate (re)start by the user forgives earlier crashes. */
  reset(): void {
    this.crashTimes = [];
  }
}
