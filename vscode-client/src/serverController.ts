// Owns the language client: finding and checking the interpreter, starting and restarting the
// server, bounded crash restarts, and pushing settings without a restart. Every problem a user
// can fix is said once, with the action that fixes it.

import { PVSC_EXTENSION_ID, PythonExtension, ResolvedEnvironment } from '@vscode/python-extension';
import type { ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import * as vscode from 'vscode';
import {
  ClientCapabilities,
  CloseAction,
  ConfigurationParams,
  DidChangeConfigurationNotification,
  ErrorAction,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  ServerOptions,
  ShowDocumentParams,
  ShowDocumentResult,
  State,
  StaticFeature,
  TransportKind,
} from 'vscode-languageclient/node';

import { errorText, unbreakable } from './format';
import {
  findInterpreter,
  formatVersion,
  InterpreterChoice,
  InterpreterNotFound,
  probeInterpreter,
  probeKey,
  probeProblems,
  ProbeResult,
} from './interpreter';
import { PathContext } from './paths';
import {
  asTranscriptResult,
  CLIENT_COMMANDS,
  CONTENT_CHANGED_NOTIFICATION,
  isListingOnly,
  PREVIEW_SCHEME,
  SERVER_COMMANDS,
} from './protocol';
import { RestartPolicy } from './restartPolicy';
import { quietRaces, serverStdio } from './serverLog';
import { TraceChannel } from './traceChannel';
import {
  didChangeConfigurationParams,
  LanguageFilter,
  SECTION,
  SERVER_KEYS,
  ServerSettings,
  toDocumentSelector,
  serverLogLevel,
  toServerSettings,
} from './settings';
import { StartupCompletions } from './startupCompletion';

export const CLIENT_ID = 'dshSessionReference';
export const CLIENT_NAME = 'DSH Session Reference';
const MAX_RESTARTS = 3;
/** How soon a completion answered "Listing dsh sessions…" is asked again. */
const LISTING_RETRY_MS = 250;
/**
 * How many times in a row it is asked again (about 30 s): a root that never finishes listing (a
 * stalled network mount) leaves the row up until the next key, rather than reopen the popup forever.
 */
const MAX_LISTING_RETRIES = 100;
const RESTART_WINDOW_MS = 3 * 60_000;
/** Columns of the editor font one suggest row has room for at the popup's default 430 px. */
const COMPLETION_ROW_COLUMNS = 46;
/**
 * Where the last probe that found no problem is kept (globalState): a start with the same
 * interpreter file, launcher and extension version skips the probe, a whole Python start (0.2-0.5 s
 * of every window's first `@`), and probes again a while after the server runs.
 */
const PROBE_CACHE = 'dshSessionReference.probe';

/** How long after a start on a kept probe the interpreter is probed again. */
const PROBE_RECHECK_MS = 20_000;

interface KeptProbe {
  readonly key: string;
  readonly probe: ProbeResult;
}

export type ServerState = 'starting' | 'running' | 'stopped';

/** Opens `dsh-preview:` documents the server asks to show; returns false to let VS Code do it. */
export type PreviewOpener = (uri: vscode.Uri) => Promise<boolean>;

/**
 * The extension's own providers of the server's virtual documents, by scheme. When the server
 * registers a scheme (`client/registerCapability` for `workspace/textDocumentContent`),
 * vscode-languageclient registers a second provider for it; its middleware hands every request
 * to these, so both providers give the same text (cache, stale notice, command fallback).
 */
export type ContentProviders = ReadonlyMap<string, vscode.TextDocumentContentProvider>;

export function pathContext(folder?: vscode.WorkspaceFolder): PathContext {
  const workspaceFolder = folder ?? vscode.workspace.workspaceFolders?.[0];
  return { home: os.homedir(), workspaceFolder: workspaceFolder?.uri.fsPath, env: process.env };
}

export function currentServerSettings(scope?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  const folder = scope === undefined ? undefined : vscode.workspace.getWorkspaceFolder(scope);
  return toServerSettings((key) => config.get(key), pathContext(folder), (key) => userValue(config, key));
}

/** A setting's user-level value (user or remote settings), never a workspace's or folder's. */
export function userValue(config: vscode.WorkspaceConfiguration, key: string): unknown {
  return config.inspect(key)?.globalValue;
}

/** Resolves when `child` has exited (at once if it already has), or after `timeoutMs`. */
function exited(child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Tells the server which client commands it may name where LSP has no request: the one that
 * opens the completion popup (a quick fix for a mention no session answers leaves an `@` and
 * opens the list to pick from), and the extension's own preview (the code lens "Preview" runs
 * it with [documentUri], so the preview opens beside the prompt and follows it). And how wide a
 * completion row is (COMPLETION_ROW_COLUMNS).
 */
export class SuggestCommandFeature implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = {
      ...(capabilities.experimental as object | undefined),
      dshSessionReference: {
        triggerSuggestCommand: 'editor.action.triggerSuggest',
        previewCommand: CLIENT_COMMANDS.previewContext,
        // What a row of the suggest popup has room for at its default width: the server shortens
        // long titles so that each row's age and project stay whole (lsp/completion.py).
        completionRowColumns: COMPLETION_ROW_COLUMNS,
      },
    };
  }

  initialize(): void {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {}
}

export class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private transition: Promise<void> = Promise.resolve();
  private readonly policy = new RestartPolicy(MAX_RESTARTS, RESTART_WINDOW_MS);
  private readonly notified = new Set<string>();
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  private readonly contentChangedEmitter = new vscode.EventEmitter<unknown>();
  private readonly startedEmitter = new vscode.EventEmitter<void>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly traceChannel = new TraceChannel();
  /** The `@` popup before the server answers, and asking again with the popup kept open. */
  readonly completions = new StartupCompletions(
    (document) => this.selects(document),
    () => this.client?.isRunning() === true,
  );
  private selector: LanguageFilter[] = toDocumentSelector(undefined);
  private previewCommandsInFlight = 0;
  /** When the extension activated (this controller was made), until the first rows of sessions. */
  private activatedAt: number | undefined = Date.now();
  /** Completions answered only "Listing dsh sessions…" in a row (see MAX_LISTING_RETRIES). */
  private listingRetries = 0;
  private readonly previewsShownAt = new Map<string, number>();
  private _state: ServerState = 'stopped';
  private watchingPythonExtension = false;
  /** Set when the server is started on a kept probe (see PROBE_CACHE): probed again once it runs. */
  private recheckProbe: { choice: InterpreterChoice; key: string } | undefined;
  /** The interpreter the running (or last started) server uses, and why: for the tooltip. */
  interpreter: { choice: InterpreterChoice; version: string } | undefined;

  readonly onDidChangeState = this.stateEmitter.event;
  /** The raw params of each `dshSessionReference/contentChanged` notification (see `changedContent`). */
  readonly onDidChangeContent = this.contentChangedEmitter.event;
  /**
   * The client has started its features (its completion provider among them). The state is
   * 'running' earlier, as soon as the server answers `initialize`, before any provider exists.
   */
  readonly onDidStart = this.startedEmitter.event;

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
    private readonly openPreview: PreviewOpener,
    private readonly contentProviders: ContentProviders = new Map(),
  ) {
    this.disposables.push(
      this.stateEmitter,
      this.contentChangedEmitter,
      this.startedEmitter,
      this.traceChannel,
      this.completions,
      vscode.workspace.onDidChangeConfiguration((event) => this.onConfigurationChanged(event)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.output.info('workspace trusted; restarting the server to use its interpreter');
        void this.restart();
      }),
    );
    // The default languages until the first start reads the documentSelector setting.
    this.completions.register(this.selector);
  }

  get state(): ServerState {
    return this._state;
  }

  /** True when `document` is one the server checks (the `documentSelector` setting). */
  selects(document: vscode.TextDocument): boolean {
    return vscode.languages.match(this.selector, document) > 0;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** The user's restart: forgives earlier crashes and repeats notifications that still apply. */
  restart(): Promise<void> {
    this.policy.reset();
    this.notified.clear();
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
    const isPreview = command === SERVER_COMMANDS.preview || command === SERVER_COMMANDS.modelText;
    if (isPreview) {
      this.previewCommandsInFlight += 1;
    }
    try {
      const params = { command, arguments: args };
      return await (token === undefined
        ? client.sendRequest('workspace/executeCommand', params)
        : client.sendRequest('workspace/executeCommand', params, token));
    } finally {
      if (isPreview) {
        this.previewCommandsInFlight -= 1;
      }
    }
  }

  /**
   * Records that the preview command showed `uri`. The server also asks to show it
   * (`window/showDocument`), possibly just after its reply; that request is then answered
   * without opening the document a second time.
   */
  previewShown(uri: vscode.Uri): void {
    this.previewsShownAt.set(uri.toString(), Date.now());
  }

  /**
   * The server's `textDocument/documentLink` reply for a document, raw (see `transcriptLinkRanges`).
   * The client sends the document's pending edits first, so the reply is for its current text.
   */
  /**
   * Where an inlay hint the server places at `position` is drawn instead (see `MentionChips.hintAt`):
   * after a chip's visible label rather than after its hidden URI, so a soft wrap never puts rows of
   * hidden text between the chip and its cost.
   */
  placeHints: (document: vscode.TextDocument, position: vscode.Position) => vscode.Position = (_, position) => position;

  /** Asks VS Code for the inlay hints of the open documents again (a chip collapsed or expanded). */
  refreshInlayHints(): void {
    const feature = this.client?.getFeature('textDocument/inlayHint');
    for (const document of vscode.workspace.textDocuments) {
      feature?.getProvider(document)?.onDidChangeInlayHints.fire();
    }
  }

  async documentLinks(uri: vscode.Uri, token: vscode.CancellationToken): Promise<unknown> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return [];
    }
    return client.sendRequest('textDocument/documentLink', { textDocument: { uri: uri.toString() } }, token);
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

  /**
   * Asks for the completion at `position` again in a little while, if the user is still there
   * (same document version, same cursor), keeping the popup open: the server answered before it
   * had listed the sessions.
   */
  private askAgainSoon(document: vscode.TextDocument, position: vscode.Position): void {
    const version = document.version;
    setTimeout(() => {
      const editor = vscode.window.activeTextEditor;
      if (editor?.document === document && document.version === version && editor.selection.active.isEqual(position)) {
        this.output.trace('completion: asking again (the sessions are still being listed)');
        this.completions.askAgain();
      }
    }, LISTING_RETRY_MS);
  }

  dispose(): void {
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
    if (
      event.affectsConfiguration(`${SECTION}.interpreter`) ||
      event.affectsConfiguration(`${SECTION}.documentSelector`) ||
      event.affectsConfiguration(`${SECTION}.server.logLevel`)
    ) {
      this.output.info('interpreter or document selector changed; restarting the server');
      void this.restart();
      return;
    }
    if (SERVER_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
      this.pushSettings();
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

  /** Shows a problem once per session (or until the user restarts), with buttons that act on it. */
  private async notifyOnce(key: string, severity: 'error' | 'warning', message: string, actions: string[]): Promise<string | undefined> {
    (severity === 'error' ? this.output.error : this.output.warn).call(this.output, message);
    if (this.notified.has(key)) {
      return undefined;
    }
    this.notified.add(key);
    const show = severity === 'error' ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    const choice = await show(message, ...actions);
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.interpreter`);
    } else if (choice === 'Show Output') {
      this.output.show(true);
    } else if (choice === 'Restart Server') {
      await vscode.commands.executeCommand('dshSessionReference.restartServer');
    }
    return choice;
  }

  /**
   * The Python extension's active environment for the first workspace folder, when that extension
   * is installed and the workspace trusted (its environment may be the workspace's own `.venv`).
   * A change of that environment restarts the server unless the interpreter setting decides.
   */
  private async pythonEnvironment(): Promise<ResolvedEnvironment | 'none' | undefined> {
    if (vscode.extensions.getExtension(PVSC_EXTENSION_ID) === undefined || !vscode.workspace.isTrusted) {
      return undefined;
    }
    try {
      const api = await PythonExtension.api();
      if (!this.watchingPythonExtension) {
        this.watchingPythonExtension = true;
        this.disposables.push(
          api.environments.onDidChangeActiveEnvironmentPath(() => {
            if ((vscode.workspace.getConfiguration(SECTION).get<string>('interpreter') ?? '').trim() === '') {
              this.output.info("the Python extension's active environment changed; restarting the server to use it");
              void this.restart();
            }
          }),
        );
      }
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      return (await api.environments.resolveEnvironment(api.environments.getActiveEnvironmentPath(folder))) ?? 'none';
    } catch (error) {
      this.output.warn(`the Python extension's environment API failed: ${errorText(error)}`);
      return 'none';
    }
  }

  private async resolveInterpreter(): Promise<{ choice: InterpreterChoice; probe: ProbeResult } | undefined> {
    const config = vscode.workspace.getConfiguration(SECTION);
    let choice: InterpreterChoice;
    try {
      choice = await findInterpreter({
        pythonEnvironment: await this.pythonEnvironment(),
        setting: config.get<string>('interpreter') ?? '',
        // A workspace's own .venv is code from the workspace: run it only once the workspace is
        // trusted (the interpreter setting is a restricted configuration for the same reason).
        workspaceFolders: vscode.workspace.isTrusted ? (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath) : [],
        platform: process.platform,
        envPath: process.env.PATH ?? '',
        envPathExt: process.env.PATHEXT,
        paths: pathContext(),
      });
    } catch (error) {
      const detail = error instanceof InterpreterNotFound ? error.message : String(error);
      void this.notifyOnce('interpreter', 'error', `DSH Session Reference needs Python 3.11 or newer. ${detail}`, ['Open Settings', 'Show Output']);
      return undefined;
    }
    if (choice.passedOver !== undefined) {
      this.output.info(`not using the Python extension's environment: ${choice.passedOver}`);
    }
    this.output.info(`interpreter: ${choice.executable} (from ${choice.origin})`);
    const key = await probeKey(choice.executable, this.launcher, String(this.context.extension.packageJSON.version));
    const kept = this.context.globalState.get<KeptProbe>(PROBE_CACHE);
    let probe: ProbeResult;
    if (key !== undefined && kept?.key === key) {
      probe = kept.probe;
      this.recheckProbe = { choice, key };
    } else {
      try {
        probe = await this.probe(choice);
      } catch (error) {
        void this.notifyOnce(
          'interpreter',
          'error',
          `DSH Session Reference could not use ${choice.origin}: ${errorText(error)}`,
          ['Open Settings', 'Show Output'],
        );
        return undefined;
      }
      const clean = probeProblems(choice, probe).every((problem) => problem.severity === 'info');
      await this.context.globalState.update(PROBE_CACHE, clean && key !== undefined ? { key, probe } : undefined);
    }
    this.output.info(`Python ${formatVersion(probe.version)} on ${probe.platform}`);
    this.interpreter = { choice, version: formatVersion(probe.version) };
    let fatal = false;
    for (const problem of probeProblems(choice, probe)) {
      if (problem.severity === 'info') {
        this.output.info(problem.message);
        continue;
      }
      fatal ||= problem.severity === 'fatal';
      const actions = problem.key === 'interpreter' ? ['Open Settings', 'Show Output'] : ['Show Output'];
      void this.notifyOnce(problem.key, problem.severity === 'fatal' ? 'error' : 'warning', problem.message, actions);
    }
    if (fatal) {
      return undefined;
    }
    return { choice, probe };
  }

  private probe(choice: InterpreterChoice): Promise<ProbeResult> {
    return probeInterpreter(choice.executable, { launcher: this.launcher, cwd: this.context.extensionPath, env: process.env });
  }

  /**
   * The server started on a kept probe: probe again now it runs. A different result replaces the
   * kept one; one with problems restarts the server, which then probes and says what is wrong.
   */
  private async recheck(check: { choice: InterpreterChoice; key: string }): Promise<void> {
    let fresh: ProbeResult | undefined;
    try {
      fresh = await this.probe(check.choice);
    } catch {
      fresh = undefined;
    }
    const kept = this.context.globalState.get<KeptProbe>(PROBE_CACHE);
    if (fresh !== undefined && JSON.stringify(kept?.probe) === JSON.stringify(fresh)) {
      return;
    }
    const clean = fresh !== undefined && probeProblems(check.choice, fresh).every((problem) => problem.severity === 'info');
    await this.context.globalState.update(PROBE_CACHE, clean ? { key: check.key, probe: fresh } : undefined);
    if (!clean) {
      this.output.info('the interpreter no longer probes as it did; restarting the server to check it');
      void this.restart();
    }
  }

  private get launcher(): string {
    return this.context.asAbsolutePath('python/launch_server.py');
  }

  private async doStart(): Promise<void> {
    if (this.client !== undefined) {
      return;
    }
    this.setState('starting');
    this.selector = toDocumentSelector(userValue(vscode.workspace.getConfiguration(SECTION), 'documentSelector'));
    const resolved = await this.resolveInterpreter();
    this.completions.register(this.selector); // the setting's languages, if not the default ones
    if (resolved === undefined) {
      this.setState('stopped');
      return;
    }
    // Never a workspace folder: an interpreter may import from its working directory (an empty
    // PYTHONPATH entry, `python -m`), and a restricted workspace must not run code of its own.
    // The server learns the workspace from `initialize`, not from its cwd.
    const cwd = this.context.extensionPath;
    const serverOptions: ServerOptions = {
      command: resolved.choice.executable,
      args: [this.launcher, 'lsp', '--log-level', serverLogLevel(vscode.workspace.getConfiguration(SECTION).get('server.logLevel'))],
      transport: TransportKind.stdio,
      options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    // A stopped client can still report its process's exit (and ask to be restarted) after a
    // newer one took over: only the current client may change the state or restart.
    const isCurrent = (): boolean => this.client === client;
    const client: LanguageClient = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, this.clientOptions(isCurrent));
    client.registerFeature(new SuggestCommandFeature());
    client.onNotification(CONTENT_CHANGED_NOTIFICATION, (params: unknown) => {
      if (isCurrent()) {
        this.contentChangedEmitter.fire(params);
      }
    });
    this.client = client;
    client.onDidChangeState((event) => {
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
    const recheck = this.recheckProbe;
    this.recheckProbe = undefined;
    try {
      await client.start();
      this.output.info('server started');
      if (isCurrent()) {
        this.startedEmitter.fire();
      }
      if (recheck !== undefined) {
        // Not beside the server's own start (its first listing): both would share two cores.
        setTimeout(() => void this.recheck(recheck), PROBE_RECHECK_MS);
      }
    } catch (error) {
      // Whatever the kept probe said, the next start probes again.
      await this.context.globalState.update(PROBE_CACHE, undefined);
      this.output.error(`server failed to start: ${String(error)}`);
      this.client = undefined;
      this.setState('stopped');
      void this.notifyOnce('start', 'error', 'The DSH Session Reference server failed to start. The output has the details.', ['Show Output', 'Restart Server']);
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    const serverProcess = client.serverProcess;
    try {
      if (client.needsStop()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.output.warn(`server stop: ${String(error)}`);
    } finally {
      await client.dispose().catch(() => undefined);
      // Start the next server only once this one has really gone: a replacement spawned while the
      // old process was still exiting sometimes lost its connection during initialize.
      await exited(serverProcess, 3000);
      this.setState('stopped');
    }
  }

  private clientOptions(isCurrent: () => boolean): LanguageClientOptions {
    return {
      documentSelector: this.selector,
      outputChannel: quietRaces(this.output),
      stdioOptions: serverStdio(),
      traceOutputChannel: this.traceChannel,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: { [SECTION]: currentServerSettings() },
      markdown: { isTrusted: false, supportHtml: false },
      errorHandler: {
        error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: false }),
        closed: () => {
          if (!isCurrent()) {
            return { action: CloseAction.DoNotRestart, handled: true };
          }
          const decision = this.policy.crashed();
          if (decision.restart) {
            this.output.warn(`the server stopped unexpectedly; restarting (${decision.crashes} of ${MAX_RESTARTS} restarts)`);
            return { action: CloseAction.Restart, handled: true };
          }
          void this.notifyOnce(
            'crash',
            'error',
            `The DSH Session Reference server stopped ${decision.crashes} times in ${RESTART_WINDOW_MS / 60_000} minutes and ` +
              'will not be restarted automatically. The output shows why.',
            ['Show Output', 'Restart Server'],
          );
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      middleware: {
        // Each mention's cost reads as one piece, never cut by a soft wrap (see `unbreakable`).
        provideInlayHints: async (document, range, token, next) => {
          const hints = await next(document, range, token);
          for (const hint of hints ?? []) {
            hint.position = this.placeHints(document, hint.position);
            if (typeof hint.label === 'string') {
              hint.label = unbreakable(hint.label);
            } else {
              for (const part of hint.label) {
                part.value = unbreakable(part.value);
              }
            }
          }
          return hints;
        },
        // While the server is still listing the sessions (a fresh server over a big root), its
        // answer is one "Listing dsh sessions…" row: ask again shortly, so the sessions replace
        // it without another key pressed and without the popup closing in between.
        provideCompletionItem: async (document, position, context, token, next) => {
          const result = await next(document, position, context, token);
          const items = Array.isArray(result) ? result : result?.items;
          if (items !== undefined && items.length > 0) {
            this.completions.answered(document, position);
          }
          if (!isListingOnly(result)) {
            this.listingRetries = 0;
            if (this.activatedAt !== undefined && items !== undefined && items.length > 0) {
              // What a user waits for after opening a window (docs/benchmarks.md quotes it).
              this.output.info(`first completion with sessions: ${Date.now() - this.activatedAt} ms after activation`);
              this.activatedAt = undefined;
            }
          } else if (this.listingRetries < MAX_LISTING_RETRIES) {
            this.listingRetries += 1;
            this.askAgainSoon(document, position);
          }
          return result;
        },
        // Sessions are searched in the extension's own picker (goToSession.ts says why Go to
        // Symbol in Workspace cannot show them as dsh lists them); other clients list them.
        provideWorkspaceSymbols: () => [],
        provideTextDocumentContent: (uri, token, next) => {
          const own = this.contentProviders.get(uri.scheme);
          return own === undefined ? next(uri, token) : own.provideTextDocumentContent(uri, token);
        },
        workspace: {
          configuration: (params: ConfigurationParams, token, next) => {
            if (params.items.every((item) => item.section === SECTION)) {
              return params.items.map((item) => currentServerSettings(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined));
            }
            return next(params, token);
          },
        },
        window: {
          showDocument: async (params: ShowDocumentParams, token, next): Promise<ShowDocumentResult | ResponseError<void>> => {
            const uri = vscode.Uri.parse(params.uri);
            if (uri.scheme !== PREVIEW_SCHEME) {
              return next(params, token);
            }
            // A preview requested through our own command is opened when its reply (with the
            // text) arrives; opening it here as well would race that and flash a stale text.
            const shownAt = this.previewsShownAt.get(uri.toString());
            if (this.previewCommandsInFlight > 0 || (shownAt !== undefined && Date.now() - shownAt < 10_000)) {
              return { success: true };
            }
            return { success: await this.openPreview(uri) };
          },
        },
      },
    };
  }
}
