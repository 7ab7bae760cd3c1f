// The language client for one server process: how the server is started (the chosen interpreter
// runs the bundled launcher), what the client declares, and the middleware that adapts the
// server's answers to VS Code. Starting, stopping and restarting it is serverController.ts.

import type { ChildProcess } from 'node:child_process';
import * as vscode from 'vscode';
import {
  ClientCapabilities,
  CloseHandlerResult,
  ConfigurationParams,
  ErrorAction,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  ServerOptions,
  ShowDocumentParams,
  ShowDocumentResult,
  StaticFeature,
} from 'vscode-languageclient/node';

import { unbreakable } from './format';
import { ListingRetries } from './listingRetries';
import { CLIENT_COMMANDS, PREVIEW_SCHEME } from './protocol';
import { HeldOutput, quietRaces, serverStdio } from './serverLog';
import { LanguageFilter, SECTION } from './settings';
import { TraceChannel } from './traceChannel';
import { currentServerSettings } from './workspaceSettings';

export const CLIENT_ID = 'dshSessionReference';
export const CLIENT_NAME = 'DSH Session Reference';
/** Columns of the editor font one suggest row has room for at the popup's default 430 px. */
const COMPLETION_ROW_COLUMNS = 46;

/**
 * The extension's own providers of the server's virtual documents, by scheme. When the server
 * registers a scheme (`client/registerCapability` for `workspace/textDocumentContent`),
 * vscode-languageclient registers a second provider for it; its middleware hands every request
 * to these, so both providers give the same text (cache, stale notice, command fallback).
 */
export type ContentProviders = ReadonlyMap<string, vscode.TextDocumentContentProvider>;

/** What the client hands to the rest of the extension, and asks of it. */
export interface ClientParts {
  readonly output: vscode.LogOutputChannel;
  readonly traceChannel: TraceChannel;
  readonly contentProviders: ContentProviders;
  readonly listingRetries: ListingRetries;
  /** The server's process closed: restart it or not (the crash policy). */
  closed(): CloseHandlerResult;
  /** Where an inlay hint the server places at `position` is drawn (see `MentionChips.hintAt`). */
  placeHints(document: vscode.TextDocument, position: vscode.Position): vscode.Position;
  /** The hints drawn in `range` of `document`, as placed (a chip is drawn only where its line and hints fit one row). */
  hintsPlaced(document: vscode.TextDocument, range: vscode.Range, hints: readonly vscode.InlayHint[]): void;
  /** Shows a `dsh-preview:` document the server asks to show; false lets VS Code do it. */
  openPreview(uri: vscode.Uri): Promise<boolean>;
  /** The document's links from the one `textDocument/documentLink` request its version shares (see `ServerController.documentLinks`). */
  documentLinks(document: vscode.TextDocument, token: vscode.CancellationToken): Promise<vscode.DocumentLink[] | undefined>;
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

/**
 * A client started before its interpreter was probed (`ServerController.startEarly`): until it has
 * started, vscode-languageclient's toast that it "couldn't create connection to server" is not
 * shown (its lines are held, `HeldOutput`): the start that follows probes the interpreter and says
 * what is wrong, once.
 */
class EarlyClient extends LanguageClient {
  constructor(
    serverOptions: ServerOptions,
    options: LanguageClientOptions,
    private readonly held: HeldOutput,
  ) {
    super(CLIENT_ID, CLIENT_NAME, serverOptions, options);
  }

  override error(message: string, data?: unknown, showNotification?: boolean | 'force'): void {
    super.error(message, data, this.held.quiet ? false : showNotification);
  }
}

/**
 * A client (not started) for the server `serverProcess` gives it: a process already running (see
 * earlyStart.ts) or spawned then, for each start of the client (a crash restart asks again). The
 * client does not own the process: whoever gives it ends it (serverController.ts). With `held`,
 * it is an early client (`EarlyClient`) and logs through it.
 */
export function createClient(serverProcess: () => Promise<ChildProcess>, selector: LanguageFilter[], parts: ClientParts, held?: HeldOutput): LanguageClient {
  const serverOptions: ServerOptions = serverProcess;
  let client: LanguageClient;
  if (held === undefined) {
    client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions(selector, parts));
  } else {
    const options = clientOptions(selector, { ...parts, output: held.channel });
    // Else a failed `initialize` is a toast of its own (vscode-languageclient's doInitialize).
    options.initializationFailedHandler = (error): boolean => {
      held.channel.error(`Server initialization failed: ${String(error)}`);
      return false;
    };
    client = new EarlyClient(serverOptions, options, held);
  }
  client.registerFeature(new SuggestCommandFeature());
  return client;
}

function clientOptions(selector: LanguageFilter[], parts: ClientParts): LanguageClientOptions {
  return {
    documentSelector: selector,
    outputChannel: quietRaces(parts.output),
    stdioOptions: serverStdio(),
    traceOutputChannel: parts.traceChannel,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: { [SECTION]: currentServerSettings() },
    markdown: { isTrusted: false, supportHtml: false },
    errorHandler: {
      error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: false }),
      closed: () => parts.closed(),
    },
    middleware: {
      // Each mention's cost reads as one piece, never cut by a soft wrap (see `unbreakable`).
      provideInlayHints: async (document, range, token, next) => {
        const hints = await next(document, range, token);
        for (const hint of hints ?? []) {
          hint.position = parts.placeHints(document, hint.position);
          if (typeof hint.label === 'string') {
            hint.label = unbreakable(hint.label);
          } else {
            for (const part of hint.label) {
              part.value = unbreakable(part.value);
            }
          }
        }
        if (hints !== undefined && hints !== null) {
          parts.hintsPlaced(document, range, hints);
        }
        return hints;
      },
      // VS Code's own link request joins the one the mention chips and broken-mention links
      // share: one request per document version, not two.
      provideDocumentLinks: (document, token) => parts.documentLinks(document, token),
      provideCompletionItem: (document, position, context, token, next) =>
        parts.listingRetries.answer(document, position, token, () => next(document, position, context, token)),
      // Sessions are searched in the extension's own picker (goToSession.ts says why Go to
      // Symbol in Workspace cannot show them as dsh lists them); other clients list them.
      provideWorkspaceSymbols: () => [],
      provideTextDocumentContent: (uri, token, next) => {
        const own = parts.contentProviders.get(uri.scheme);
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
          return { success: await parts.openPreview(uri) };
        },
      },
    },
  };
}
