// Owns the server's lifetime: starting, stopping and restarting it one step at a time, bounded
// crash restarts, pushing settings without a restart, and the requests the rest of the extension
// sends it. Which Python runs it is python.ts, the client itself server.ts.

import type { ChildProcess } from 'node:child_process';
import * as vscode from 'vscode';
import { CloseAction, CloseHandlerResult, DidChangeConfigurationNotification, DocumentLink as LspDocumentLink, LanguageClient, State } from 'vscode-languageclient/node';

import { errorText } from './format';
import { ListingRetries } from './listingRetries';
import { Notices } from './notices';
import { PreviewRequests } from './preview';
import { asTranscriptResult, CONTENT_CHANGED_NOTIFICATION, DIAGNOSTIC_SOURCE, SERVER_COMMANDS } from './protocol';
import { PythonInterpreter } from './python';
import { RestartPolicy } from './restartPolicy';
import { ClientParts, ContentProviders, createClient } from './server';
import { EarlyServer, ended, sameSpec, serverArgs, spawnServer, SpawnSpec } from './serverProcess';
import { HeldOutput } from './serverLog';
import { didChangeConfigurationParams, LanguageFilter, toDocumentSelector } from './settings';
import { StartupCompletions } from './startupCompletion';
import { TraceChannel } from './traceChannel';
import { currentServerSettings, documentSelectorSetting, serverLogLevelSetting, settingsChange } from './workspaceSettings';

const MAX_RESTARTS = 3;
const RESTART_WINDOW_MS = 3 * 60_000;

/** A `textDocument/documentLink` request shared by the askers of one document version. */
interface LinkReply {
  readonly client: LanguageClient;
  readonly version: number;
  /** The server's diagnostics of the document when it was asked (`ownDiagnostics`): a link depends on them. */
  readonly diagnostics: string;
  readonly reply: Promise<unknown>;
  readonly cancel: vscode.CancellationTokenSource;
  /** Callers awaiting it whose token is not cancelled. */
  waiting: number;
  settled: boolean;
}

export type ServerState = 'starting' | 'running' | 'stopped';

/** Opens `dsh-preview:` documents the server asks to show; returns false to let VS Code do it. */
export type PreviewOpener = (uri: vscode.Uri) => Promise<boolean>;

/** How long a stopped server has to exit after `shutdown` and `exit` before it is killed. */
const EXIT_GRACE_MS = 3000;

export class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private transition: Promise<void> = Promise.resolve();
  private readonly policy = new RestartPolicy(MAX_RESTARTS, RESTART_WINDOW_MS);
  private readonly notices: Notices;
  /** What `activate` hands over (`attach`): which Python runs the server is decided with it. */
  private attached: { readonly python: PythonInterpreter; readonly extensionPath: string } | undefined;
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  private readonly contentChangedEmitter = new vscode.EventEmitter<unknown>();
  private readonly startedEmitter = new vscode.EventEmitter<void>();
  private readonly disposables: vscode.Disposable[] = [];
  /** Per document, the `textDocument/documentLink` request of its current version (see `documentLinks`). */
  private readonly linkReplies = new Map<string, LinkReply>();
  private readonly traceChannel = new TraceChannel();
  /** The `@` popup before the server answers, and asking again with the popup kept open. */
  readonly completions = new StartupCompletions(
    (document) => this.selects(document),
    // Not `isRunning()`: that holds from the `initialize` answer on, before the client has
    // registered its completion provider, and an `@` typed in between found neither provider.
    () => this.client !== undefined && this.client === this.startedClient && this.client.isRunning(),
  );
  private readonly listingRetries: ListingRetries;
  private readonly previewRequests = new PreviewRequests();
  private selector: LanguageFilter[] = toDocumentSelector(undefined);
  /** The last client whose start finished: its features (its completion provider) are registered. */
  private startedClient: LanguageClient | undefined;
  /** The current client's server process (the client is handed it and does not end it). */
  private process: ChildProcess | undefined;
  /** The server spawned as the extension loaded (earlyStart.ts), until the first start takes or discards it. */
  private early: EarlyServer | undefined;
  /** The client `startEarly` started, until `start` has checked its interpreter (its spawn spec). */
  private unchecked: { readonly client: LanguageClient; readonly spec: SpawnSpec } | undefined;
  private _state: ServerState = 'stopped';

  readonly onDidChangeState = this.stateEmitter.event;
  /** The raw params of each `dshSessionReference/contentChanged` notification (see `changedContent`). */
  readonly onDidChangeContent = this.contentChangedEmitter.event;
  /**
   * The client has started its features (its completion provider among them). The state is
   * 'running' earlier, as soon as the server answers `initialize`, before any provider exists.
   */
  readonly onDidStart = this.startedEmitter.event;

  /**
   * Made as the extension's code loads (extension.ts), before VS Code calls `activate`; `attach`
   * gives it the extension's context, which it needs to start a server (see `startEarly`).
   */
  constructor(
    readonly output: vscode.LogOutputChannel,
    private readonly openPreview: PreviewOpener,
    private readonly contentProviders: ContentProviders = new Map(),
    start: { loadedAt: number; early?: EarlyServer } = { loadedAt: Date.now() },
  ) {
    this.early = start.early;
    this.notices = new Notices(output);
    this.listingRetries = new ListingRetries(this.completions, output, start.loadedAt);
    this.disposables.push(
      this.stateEmitter,
      this.contentChangedEmitter,
      this.startedEmitter,
      this.traceChannel,
      this.completions,
      vscode.workspace.onDidChangeConfiguration((event) => this.onConfigurationChanged(event)),
      vscode.workspace.onDidCloseTextDocument((document) => this.forgetLinks(document.uri.toString())),
      vscode.languages.onDidChangeDiagnostics((event) => {
        for (const uri of event.uris) {
          // Only the server's own diagnostics change its links (Markdown's link checks do not).
          const kept = this.linkReplies.get(uri.toString());
          if (kept !== undefined && kept.diagnostics !== ownDiagnostics(uri)) {
            this.forgetLinks(uri.toString());
          }
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.output.info('workspace trusted; restarting the server to use its interpreter');
        void this.restart();
      }),
    );
    // The default languages until the first start reads the documentSelector setting.
    this.completions.register(this.selector);
  }

  /** The extension's context, from `activate`: which interpreter to run is decided with it. */
  attach(context: vscode.ExtensionContext): void {
    const python = new PythonInterpreter(context, this.output, this.notices, (reason) => {
      this.output.info(reason);
      void this.restart();
    });
    this.attached = { python, extensionPath: context.extensionPath };
    this.disposables.push(python);
  }

  get state(): ServerState {
    return this._state;
  }

  /** The interpreter the running (or last started) server uses, and why: for the tooltip. */
  get interpreter(): PythonInterpreter['interpreter'] {
    return this.attached?.python.interpreter;
  }

  /** True when `document` is one the server checks (the `documentSelector` setting). */
  selects(document: vscode.TextDocument): boolean {
    return vscode.languages.match(this.selector, document) > 0;
  }

  /** Starts the server (after `attach`); a client `startEarly` started is kept if its interpreter is the one chosen. */
  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /**
   * Starts a client on the server spawned as the extension's code began to run (earlyStart.ts),
   * before `activate`. VS Code prepares the extension's context before it calls `activate` (up to a
   * second or more on a busy machine, docs/benchmarks.md); the client's start, the server's `initialize` and the
   * completion provider's registration take that time instead of following it. The
   * interpreter was found as `start` finds it, but not probed: the kept probe is in the context's
   * globalState. So `start`, once `activate` is called, resolves the interpreter as always and
   * keeps this client only if it runs the same server and nothing is wrong; else it stops it and
   * starts as it would have. Until this client has started, what it logs is held (`HeldOutput`),
   * and a failure to start is logged at debug only: the start after `activate` says what is wrong,
   * once (its probe's notices).
   */
  startEarly(): void {
    const early = this.early;
    if (early !== undefined) {
      void this.enqueue(() => this.doStartEarly(early.spec));
    }
  }

  /** The user's restart: forgives earlier crashes and repeats notifications that still apply. */
  restart(): Promise<void> {
    this.policy.reset();
    this.notices.reset();
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  /**
   * Runs a server command, making sure pending edits have reached the server first. A cancelled
   * `token` sends `$/cancelRequest` and rejects the promise.
   */
  async executeCommand(command: string, args: unknown[], token?: vscode.CancellationToken): Promise<unknown> {
    await this.transition;
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      throw new Error('The DSH Session Reference server is not running. Run "DSH: Restart server" or see "DSH: Show output".');
    }
    const params = { command, arguments: args };
    const send = (): Promise<unknown> =>
      token === undefined ? client.sendRequest('workspace/executeCommand', params) : client.sendRequest('workspace/executeCommand', params, token);
    const isPreview = command === SERVER_COMMANDS.preview || command === SERVER_COMMANDS.modelText;
    return isPreview ? this.previewRequests.during(send) : send();
  }

  /**
   * Records that the preview command showed `uri`. The server also asks to show it
   * (`window/showDocument`), possibly just after its reply; that request is then answered
   * without opening the document a second time.
   */
  previewShown(uri: vscode.Uri): void {
    this.previewRequests.shown(uri);
  }

  /**
   * Where an inlay hint the server places at `position` is drawn instead (see `MentionChips.hintAt`):
   * after a chip's visible label rather than after its hidden URI, so a soft wrap never puts rows of
   * hidden text between the chip and its cost.
   */
  placeHints: (document: vscode.TextDocument, position: vscode.Position) => vscode.Position = (_, position) => position;

  /** Told the hints drawn in a stretch of a document (see `MentionChips.hintsPlaced`). */
  hintsPlaced: (document: vscode.TextDocument, range: vscode.Range, hints: readonly vscode.InlayHint[]) => void = () => undefined;

  /** Asks VS Code for the inlay hints of the open documents again (a chip collapsed or expanded). */
  refreshInlayHints(): void {
    const feature = this.client?.getFeature('textDocument/inlayHint');
    for (const document of vscode.workspace.textDocuments) {
      feature?.getProvider(document)?.onDidChangeInlayHints.fire();
    }
  }

  /**
   * The server's `textDocument/documentLink` reply for a document, raw (see `transcriptLinkRanges`).
   * The client sends the document's pending edits first, so the reply is for its current text.
   * One request serves every asker of a document version (the mention chips and the broken
   * mention links both ask after each edit): the reply is kept until the document changes, the
   * server restarts, or its diagnostics change (the server republishes them when what its links
   * say may have changed: the sessions root, the settings). A caller's cancellation rejects its
   * own wait; the request itself is cancelled only once every caller waiting on it has cancelled.
   */
  async documentLinks(document: vscode.TextDocument, token: vscode.CancellationToken): Promise<unknown> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return [];
    }
    if (token.isCancellationRequested) {
      throw new vscode.CancellationError();
    }
    const key = document.uri.toString();
    let asked = this.linkReplies.get(key);
    if (asked === undefined || asked.client !== client || asked.version !== document.version) {
      const cancel = new vscode.CancellationTokenSource();
      const reply = client.sendRequest('textDocument/documentLink', { textDocument: { uri: key } }, cancel.token);
      const entry: LinkReply = { client, version: document.version, diagnostics: ownDiagnostics(document.uri), reply, cancel, waiting: 0, settled: false };
      asked = entry;
      this.linkReplies.set(key, entry);
      const settle = (): void => {
        entry.settled = true;
        cancel.dispose();
      };
      reply.then(settle, () => {
        settle();
        if (this.linkReplies.get(key) === entry) {
          this.linkReplies.delete(key); // a failed or cancelled reply is asked for again next time
        }
      });
    }
    const entry = asked;
    entry.waiting += 1;
    let cancelled: vscode.Disposable | undefined;
    try {
      return await Promise.race([
        entry.reply,
        new Promise<never>((_, reject) => {
          cancelled = token.onCancellationRequested(() => {
            entry.waiting -= 1;
            // Cancelled only once its version is gone: VS Code cancels a link request as a view
            // changes and asks again for the same version, which then shares this one.
            if (entry.waiting === 0 && !entry.settled && document.version !== entry.version) {
              entry.cancel.cancel();
            }
            reject(new vscode.CancellationError());
          });
        }),
      ]);
    } finally {
      cancelled?.dispose();
      if (!token.isCancellationRequested) {
        entry.waiting -= 1;
      }
    }
  }

  /** Drops the kept link reply of `uri` (a request still under way goes on for those awaiting it). */
  private forgetLinks(uri: string): void {
    this.linkReplies.delete(uri);
  }


  /**
   * Has VS Code ask for `document`'s code lenses again. After an edit it sometimes asks no more
   * (seen in the e2e: a lens kept "dsh would not send this" for 20 s after the fix, no request
   * sent); the status bar calls this when the prompt's figures it reads have changed.
   */
  refreshCodeLenses(document: vscode.TextDocument): void {
    this.client?.getFeature('textDocument/codeLens').getProvider(document)?.onDidChangeCodeLensEmitter.fire();
  }

  /** Asks the server for a virtual document's text (LSP 3.18 `workspace/textDocumentContent`). */
  async textDocumentContent(uri: vscode.Uri, token?: vscode.CancellationToken): Promise<string | undefined> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return undefined;
    }
    try {
      const params = { uri: uri.toString() };
      const result = await (token === undefined
        ? client.sendRequest<{ text?: unknown } | null>('workspace/textDocumentContent', params)
        : client.sendRequest<{ text?: unknown } | null>('workspace/textDocumentContent', params, token));
      return typeof result?.text === 'string' ? result.text : undefined;
    } catch (error) {
      if (!token?.isCancellationRequested) {
        this.output.warn(`workspace/textDocumentContent ${uri.toString()}: ${String(error)}`);
      }
      return undefined;
    }
  }

  /**
   * A session transcript's text: `workspace/textDocumentContent` first, else the server's
   * `transcript` command (a server that did not register the scheme still answers that).
   */
  async transcriptText(uri: vscode.Uri, token?: vscode.CancellationToken): Promise<string | undefined> {
    const text = await this.textDocumentContent(uri, token);
    if (text !== undefined || token?.isCancellationRequested || this.client === undefined || !this.client.isRunning()) {
      return text;
    }
    try {
      return asTranscriptResult(await this.executeCommand(SERVER_COMMANDS.transcript, [uri.toString()], token)).text;
    } catch (error) {
      if (!token?.isCancellationRequested) {
        this.output.warn(`${SERVER_COMMANDS.transcript} ${uri.toString()}: ${errorText(error)}`);
      }
      return undefined;
    }
  }

  /** Sends the current settings; the server applies them to open documents without a restart. */
  pushSettings(): void {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return;
    }
    const settings = currentServerSettings();
    this.output.info(`settings changed: ${JSON.stringify(settings)}`);
    void client.sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(settings));
  }

  dispose(): void {
    this.takeEarly(undefined);
    void this.stop();
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.transition.then(step, step);
    this.transition = next.catch(() => undefined);
    return next;
  }

  private setState(state: ServerState): void {
    if (this._state !== state) {
      this._state = state;
      this.stateEmitter.fire(state);
    }
  }

  private onConfigurationChanged(event: vscode.ConfigurationChangeEvent): void {
    const change = settingsChange(event);
    if (change === 'restart') {
      this.output.info('interpreter or document selector changed; restarting the server');
      void this.restart();
    } else if (change === 'push') {
      this.pushSettings();
    }
  }

  private async doStart(): Promise<void> {
    const attached = this.attached;
    const unchecked = this.unchecked;
    this.unchecked = undefined;
    if (attached === undefined || (this.client !== undefined && unchecked === undefined)) {
      return; // not attached yet (a restart before `activate`: its start follows), or running
    }
    this.readSelector();
    const resolved = await attached.python.resolve();
    this.completions.register(this.selector); // the setting's languages, if not the default ones
    const spec: SpawnSpec | undefined =
      resolved === undefined
        ? undefined
        : { command: resolved.choice.executable, args: serverArgs(attached.python.launcher, serverLogLevelSetting()), cwd: attached.extensionPath };
    if (unchecked !== undefined && this.client === unchecked.client) {
      if (spec !== undefined && sameSpec(spec, unchecked.spec)) {
        attached.python.started();
        return;
      }
      this.output.info(`stopping the server started early: ${spec === undefined ? 'its interpreter cannot run it' : 'another interpreter is chosen'}`);
      await this.doStop();
    }
    if (spec === undefined) {
      this.takeEarly(undefined);
      this.setState('stopped');
      return;
    }
    this.setState('starting');
    if (!(await this.run(this.newClient(spec, undefined), false))) {
      await attached.python.failed();
      void this.notices.once('start', 'error', 'The DSH Session Reference server failed to start. The output has the details.', ['Show Output', 'Restart Server']);
      return;
    }
    attached.python.started();
  }

  /** `startEarly`'s step: a client on the early server, not yet checked (`unchecked`). */
  private async doStartEarly(spec: SpawnSpec): Promise<void> {
    if (this.client !== undefined || this.attached !== undefined) {
      return; // defensive: `startEarly` is called as the module loads, before `activate` can be
    }
    this.readSelector();
    this.completions.register(this.selector);
    const held = new HeldOutput(this.output);
    const client = this.newClient(spec, held);
    this.unchecked = { client, spec };
    if (await this.run(client, true)) {
      held.release(); // released already as it reached Running
    } else {
      held.drop();
      if (this.unchecked?.client === client) {
        this.unchecked = undefined;
      }
    }
  }

  /** The documentSelector setting, read as a start begins (the state says it is starting, unless a client runs). */
  private readSelector(): void {
    if (this.client === undefined) {
      this.setState('starting');
    }
    this.selector = documentSelectorSetting();
  }

  /**
   * A client (now `this.client`) for the server `spec` runs, the early server if it was spawned
   * for it. With `held` it is an early client (see `startEarly`): until it has run, its lines are
   * held, its server is not restarted, and no server but the early one is spawned for it.
   */
  private newClient(spec: SpawnSpec, held: HeldOutput | undefined): LanguageClient {
    // A stopped client can still report its process's exit (and ask to be restarted) after a
    // newer one took over: only the current client may change the state or restart.
    const isCurrent = (): boolean => this.client === client;
    const quiet = (): boolean => held?.quiet === true;
    // Never a workspace folder as cwd: an interpreter may import from its working directory (an
    // empty PYTHONPATH entry, `python -m`), and a restricted workspace must not run code of its
    // own. The server learns the workspace from `initialize`, not from its cwd.
    const serverProcess = async (): Promise<ChildProcess> => this.serverProcess(spec, isCurrent, quiet);
    const parts: ClientParts = {
      output: this.output,
      traceChannel: this.traceChannel,
      contentProviders: this.contentProviders,
      listingRetries: this.listingRetries,
      closed: () => (isCurrent() && !quiet() ? this.crashed() : { action: CloseAction.DoNotRestart, handled: true }),
      placeHints: (document, position) => this.placeHints(document, position),
      hintsPlaced: (document, range, hints) => this.hintsPlaced(document, range, hints),
      openPreview: async (uri) => this.previewRequests.ours(uri) || (await this.openPreview(uri)),
      documentLinks: async (document, token) => {
        let links: unknown;
        try {
          links = await this.documentLinks(document, token);
        } catch (error) {
          if (!token.isCancellationRequested) {
            this.output.debug(`document links of ${document.uri.toString()}: ${errorText(error)}`);
          }
          return undefined; // cancelled, or the server stopped: VS Code asks again after the next edit
        }
        return client.protocol2CodeConverter.asDocumentLinks(Array.isArray(links) ? (links as LspDocumentLink[]) : null, token);
      },
    };
    const client: LanguageClient = createClient(serverProcess, this.selector, parts, held);
    client.onNotification(CONTENT_CHANGED_NOTIFICATION, (params: unknown) => {
      if (isCurrent()) {
        this.contentChangedEmitter.fire(params);
      }
    });
    this.client = client;
    client.onDidChangeState((event) => {
      if (event.newState === State.Running) {
        held?.release(); // it started: what it logged meanwhile, at its own levels
      }
      if (!isCurrent()) {
        return;
      }
      if (event.newState === State.Running) {
        this.setState('running');
      } else if (event.newState === State.Stopped) {
        this.setState('stopped');
      } else {
        this.setState('starting');
      }
    });
    return client;
  }

  /**
   * Starts `client`; false if it failed, which is logged (at debug for an `early` one, whose lines
   * are held). A client that failed is disposed and its process killed, which may still run (an
   * `initialize` answered with an error): vscode-languageclient ends only processes it spawned.
   */
  private async run(client: LanguageClient, early: boolean): Promise<boolean> {
    try {
      await client.start();
      this.output.info(`server started (${this.listingRetries.sinceLoaded()} ms after activation)`);
      if (this.client === client) {
        this.startedClient = client;
        this.startedEmitter.fire();
      }
      return true;
    } catch (error) {
      if (!early) {
        this.output.error(`server failed to start: ${String(error)}`);
      } else {
        this.output.debug(`the server started early did not start (${String(error)}); the start after activation checks the interpreter`);
      }
      if (this.client === client) {
        const process = this.process;
        this.client = undefined;
        this.process = undefined;
        process?.kill('SIGKILL');
        this.setState('stopped');
      }
      await client.dispose().catch(() => undefined);
      return false;
    }
  }

  /**
   * The early server if it was spawned for `spec` (undefined: none is wanted); it is killed
   * otherwise. Only the first start asks: later ones spawn their own.
   */
  private takeEarly(spec: SpawnSpec | undefined): ChildProcess | undefined {
    const early = this.early;
    this.early = undefined;
    if (early === undefined) {
      return undefined;
    }
    if (spec === undefined) {
      early.discard();
      return undefined;
    }
    const child = early.take(spec);
    const taken = `server spawned early (${early.spawnedAt - this.listingRetries.loadedAt} ms after activation; the client took it ${this.listingRetries.sinceLoaded()} ms after)`;
    this.output.info(child === undefined ? 'the server spawned early was not for this start, or has exited' : taken);
    return child;
  }

  /**
   * The process for each start of `isCurrent`'s client (a crash restart asks again): the early
   * server for the first, else a new one. Its exit is logged here, as the client logs the exit of a
   * process it spawns itself, and `doStop` ends it.
   */
  private async serverProcess(spec: SpawnSpec, isCurrent: () => boolean, quiet: () => boolean): Promise<ChildProcess> {
    let child = this.takeEarly(spec);
    if (child === undefined && quiet()) {
      // An early client runs only the early server: another, of an interpreter not yet probed, is
      // the checked start's to spawn.
      throw new Error('the server spawned early has exited');
    }
    if (child === undefined) {
      child = spawnServer(spec, (error) => this.output.error(`server process: ${errorText(error)}`));
      if (child.pid === undefined) {
        throw new Error(`Launching server using command ${spec.command} failed.`);
      }
      this.output.info(`server spawned (${this.listingRetries.sinceLoaded()} ms after activation)`);
    }
    child.on('exit', (code, signal) => {
      const log = quiet() ? this.output.debug.bind(this.output) : this.output.error.bind(this.output);
      if (code === 0) {
        this.output.info('Server process exited successfully');
      } else if (code !== null) {
        log(`Server process exited with code ${code}.`);
      } else if (signal !== null) {
        log(`Server process exited with signal ${signal}.`);
      }
    });
    if (isCurrent()) {
      this.process = child;
    } else {
      child.kill('SIGKILL'); // its client was stopped while it started
    }
    return child;
  }

  /** The current server's process closed: restarted unless it has crashed too often lately. */
  private crashed(): CloseHandlerResult {
    const decision = this.policy.crashed();
    if (decision.restart) {
      this.output.warn(`the server stopped unexpectedly; restarting (${decision.crashes} of ${MAX_RESTARTS} restarts)`);
      return { action: CloseAction.Restart, handled: true };
    }
    void this.notices.once(
      'crash',
      'error',
      `The DSH Session Reference server stopped ${decision.crashes} times in ${RESTART_WINDOW_MS / 60_000} minutes and ` +
        'will not be restarted automatically. The output shows why.',
      ['Show Output', 'Restart Server'],
    );
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    const serverProcess = this.process;
    this.process = undefined;
    try {
      if (client.needsStop()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.output.warn(`server stop: ${String(error)}`);
    } finally {
      await client.dispose().catch(() => undefined);
      // Start the next server only once this one has really gone: a replacement spawned while the
      // old process was still exiting sometimes lost its connection during initialize. The client
      // was handed the process, so it does not kill one that ignores `exit`: this does.
      await ended(serverProcess, EXIT_GRACE_MS);
      this.setState('stopped');
    }
  }
}

/** The server's diagnostics of `uri`, as a string that changes when they do. */
function ownDiagnostics(uri: vscode.Uri): string {
  const own = vscode.languages.getDiagnostics(uri).filter((diagnostic) => diagnostic.source === DIAGNOSTIC_SOURCE);
  return JSON.stringify(own.map((diagnostic) => [diagnostic.range.start.line, diagnostic.range.start.character, diagnostic.range.end.line, diagnostic.range.end.character, diagnostic.severity, diagnostic.code, diagnostic.message]));
}
