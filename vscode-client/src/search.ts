// Search-as-you-type against the server, as the session pickers do it: each keystroke restarts a
// short quiet period, a new query cancels the one still in flight, and only the newest answer is
// shown (a slow older answer never replaces a newer one). Kept free of `vscode` so it is unit
// tested; the caller passes VS Code's CancellationTokenSource.

/** The part of `vscode.CancellationTokenSource` this needs. */
export interface CancelSource<Token> {
  readonly token: Token;
  cancel(): void;
  dispose(): void;
}

export interface SearchHandlers<Result, Token> {
  /** Asks the server; `token` is cancelled once a newer query starts or the search is disposed. */
  readonly run: (query: string, token: Token) => Promise<Result>;
  /** The newest query's answer. */
  readonly show: (result: Result, query: string) => void;
  /** The newest query failed (a cancelled older one is never reported). */
  readonly fail: (error: unknown, query: string) => void;
  /** True while the newest query is in flight. */
  readonly busy?: (busy: boolean) => void;
}

export class LatestSearch<Result, Token> {
  private asked = 0;
  private inFlight: CancelSource<Token> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private disposed = false;

  constructor(
    private readonly handlers: SearchHandlers<Result, Token>,
    private readonly newSource: () => CancelSource<Token>,
    private readonly delayMs: number,
  ) {}

  /** Searches once the user has stopped typing for `delayMs`. */
  schedule(query: string): void {
    if (this.disposed) {
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.now(query), this.delayMs);
  }

  /** Searches at once, cancelling whatever is pending or in flight. Resolves when it is answered. */
  async now(query: string): Promise<void> {
    if (this.disposed) {
      return;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    this.inFlight?.cancel();
    this.inFlight?.dispose();
    const source = this.newSource();
    this.inFlight = source;
    const mine = ++this.asked;
    this.handlers.busy?.(true);
    try {
      const result = await this.handlers.run(query, source.token);
      if (mine === this.asked && !this.disposed) {
        this.handlers.show(result, query);
      }
    } catch (error) {
      if (mine === this.asked && !this.disposed) {
        this.handlers.fail(error, query);
      }
    } finally {
      if (mine === this.asked) {
        this.inFlight = undefined;
        source.dispose();
        if (!this.disposed) {
          this.handlers.busy?.(false);
        }
      }
    }
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.timer);
    this.inFlight?.cancel();
    this.inFlight?.dispose();
    this.inFlight = undefined;
  }
}
