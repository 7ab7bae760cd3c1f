// Where a completion was last asked and answered, so that the extension does not ask VS Code for
// the popup again at a place where it is already answered or on its way (startupCompletion.ts).
// Free of `vscode`: places are strings (document, version, line, character), as the caller keys them.

export class CompletionMarks {
  /** Where a completion was last answered with rows (ours or the server's). */
  private answered: string | undefined;
  /** Where a completion is being asked of the server, until its answer (or failure) comes back. */
  private inFlight: string | undefined;

  /** A completion at `place` got rows. */
  answer(place: string): void {
    this.answered = place;
  }

  /** A completion at `place` is asked of the server; call the function returned once it ended. */
  ask(place: string): () => void {
    this.inFlight = place;
    return () => {
      if (this.inFlight === place) {
        this.inFlight = undefined;
      }
    };
  }

  /** Whether asking at `place` again would only repeat a question: it got rows, or is on its way. */
  settled(place: string): boolean {
    return this.answered === place || this.inFlight === place;
  }
}
