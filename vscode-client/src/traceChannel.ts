// The LSP traffic channel, switched by the `dshSessionReference.trace.server` setting.
// vscode-languageclient 11 traces only when its trace channel's *log level* is Trace (set by hand
// with "Developer: Set Log Level"), and then reads `trace.server` merely for the verbosity, so
// the setting alone would show nothing. This channel derives its log level from the setting,
// which makes the setting do what its description says. The VS Code channel behind it is created
// on the first traced message, so it appears in the Output list only when tracing is on.

import * as vscode from 'vscode';

import { SECTION } from './settings';

const NAME = 'DSH Session Reference (LSP trace)';

function levelFromSetting(): vscode.LogLevel {
  const value = vscode.workspace.getConfiguration(SECTION).get<string>('trace.server', 'off');
  return value === 'messages' || value === 'verbose' ? vscode.LogLevel.Trace : vscode.LogLevel.Info;
}

export class TraceChannel implements vscode.LogOutputChannel {
  readonly name = NAME;
  private channel: vscode.OutputChannel | undefined;
  private disposed = false;
  private level = levelFromSetting();
  private readonly levelEmitter = new vscode.EventEmitter<vscode.LogLevel>();
  private readonly subscription: vscode.Disposable;
  readonly onDidChangeLogLevel = this.levelEmitter.event;

  constructor() {
    this.subscription = vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.trace.server`)) {
        const level = levelFromSetting();
        if (level !== this.level) {
          this.level = level;
          this.levelEmitter.fire(level);
        }
      }
    });
  }

  get logLevel(): vscode.LogLevel {
    return this.level;
  }

  /** The channel, created on first use; undefined once disposed (a stopping client may still log). */
  private get output(): vscode.OutputChannel | undefined {
    if (!this.disposed) {
      this.channel ??= vscode.window.createOutputChannel(NAME);
    }
    return this.channel;
  }

  trace(message: string): void {
    if (this.level === vscode.LogLevel.Trace) {
      this.output?.appendLine(message);
    }
  }

  debug(message: string): void {
    this.trace(message);
  }

  info(message: string): void {
    this.output?.appendLine(message);
  }

  warn(message: string): void {
    this.output?.appendLine(message);
  }

  error(error: string | Error): void {
    this.output?.appendLine(error instanceof Error ? error.message : error);
  }

  append(value: string): void {
    this.output?.append(value);
  }

  appendLine(value: string): void {
    this.output?.appendLine(value);
  }

  replace(value: string): void {
    this.output?.replace(value);
  }

  clear(): void {
    this.channel?.clear();
  }

  show(columnOrPreserveFocus?: vscode.ViewColumn | boolean, preserveFocus?: boolean): void {
    if (typeof columnOrPreserveFocus === 'boolean' || columnOrPreserveFocus === undefined) {
      this.output?.show(columnOrPreserveFocus);
    } else {
      this.output?.show(columnOrPreserveFocus, preserveFocus);
    }
  }

  hide(): void {
    this.channel?.hide();
  }

  dispose(): void {
    this.disposed = true;
    this.subscription.dispose();
    this.levelEmitter.dispose();
    this.channel?.dispose();
    this.channel = undefined;
  }
}
