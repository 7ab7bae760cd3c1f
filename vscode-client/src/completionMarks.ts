// Where a completion was last asked and answered, so that the extension does not ask VS Code for
// the popup again at a place where it is already answered or on its way (startupCompletion.ts).
// Free of `vscode`: places are strings (document, version, line, character), as the caller keys them.

export class CompletionMarks {
  /** Where a completion was last answered with rows (ours or the server's). */
  private answered: string | undefined;
  /**
   * Where a completion is being asked of the server, until its answer (or failure) comes back: the
   * latest question, an object of its own, so that an earlier one at the same place (VS Code asks
   * again before the first answer comes) ending clears nothing of it.
   */
  private inFlight: { readonly place: string } | undefined;

  /** A completion at `place` got rows. */
  answer(place: string): void {
    this.answered = place;
  }

  /** A completion at `place` is asked of the server; call the function returned once it ended. */
  ask(place: string): () => void {
    const question = { place };
    this.inFlight = question;
    return () => {
      if (this.inFlight === question) {
        this.inFlight = undefined;
      }
    };
  }

  /** Whether asking at `place` again would only repeat a question: it got rows, or is on its way. */
  settled(place: string): boolean {
    return this.answered === place || this.inFlight?.place === place;
  }
}
