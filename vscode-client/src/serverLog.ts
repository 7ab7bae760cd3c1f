// The server's stderr in the output channel, each record at the level the server logged it.
// vscode-languageclient writes every stderr line at "error", so a warning, an info line, and each
// line of a record's traceback all read as errors. The server writes `LEVEL logger: message`
// (logsetup.py's LOG_FORMAT); a line without that start continues the record above it (a
// traceback), and anything before the first record (Python's own crash output) is an error.

import * as readline from 'node:readline';
import type * as stream from 'node:stream';

import type * as vscode from 'vscode';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const LEVELS: Readonly<Record<string, LogLevel>> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/** The level of one stderr line: its record's, or `previous` for a line that continues one. */
export function levelOf(line: string, previous: LogLevel): LogLevel {
  const first = /^([A-Z]+) \S+: /u.exec(line)?.[1];
  return (first === undefined ? undefined : LEVELS[first]) ?? previous;
}

/** vscode-languageclient's `stdioOptions`: stderr by the server's levels (stdout carries LSP). */
export function serverStdio(): {
  stdout: (input: stream.Readable, channel: vscode.LogOutputChannel) => void;
  stderr: (input: stream.Readable, channel: vscode.LogOutputChannel) => void;
} {
  const lines = (input: stream.Readable, write: (line: string) => void): void => {
    readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', write);
  };
  return {
    stdout: (input, channel) => lines(input, (line) => channel.info(line)),
    stderr: (input, channel) => {
      let level: LogLevel = 'error';
      lines(input, (line) => {
        level = levelOf(line, level);
        channel[level](line);
      });
    },
  };
}

/**
 * The client's own stop/start races: a request VS Code made while the server was stopping or
 * starting (a restart, a settings change) fails with one of these, which is no fault of anyone's.
 */
const RACES = ['Starting server failed', 'Client is not running', 'Pending response rejected since connection got disposed', 'Connection is disposed'];

/**
 * vscode-languageclient logs each failed request at error, with the error's stack: for a request
 * lost to a restart that is one line at info instead (`Request textDocument/codeLens failed:
 * Starting server failed`); undefined for anything else, which stays an error.
 */
export function raceLine(message: string): string | undefined {
  const [first, ...rest] = message.split('\n');
  if (!/^Request \S+ failed\.$/u.test(first)) {
    return undefined;
  }
  const reason = rest.map((line) => line.trim()).find((line) => RACES.some((race) => line.includes(race)));
  return reason === undefined ? undefined : `${first.slice(0, -1)}: ${reason.replace(/^Error: /u, '')}`;
}

/** The output channel handed to vscode-languageclient, with its request races at info (raceLine). */
export function quietRaces(channel: vscode.LogOutputChannel): vscode.LogOutputChannel {
  return new Proxy(channel, {
    get(target, property, receiver) {
      if (property === 'error') {
        return (message: string | Error, ...args: unknown[]): void => {
          const line = typeof message === 'string' ? raceLine(message) : undefined;
          if (line === undefined) {
            target.error(message, ...args);
          } else {
            target.info(line);
          }
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const LEVEL_NAMES: Readonly<Record<LogLevel, true>> = { debug: true, info: true, warn: true, error: true };

/** How many lines an early client's output holds at most (`HeldOutput`); the rest are counted. */
const HELD_LINES = 500;
/** How many characters of them at most: one stderr line may be megabytes long. */
const HELD_CHARS = 256 * 1024;

/**
 * The output of a client started before its interpreter was probed (`ServerController.startEarly`),
 * its server's stderr included: held until it is known whether that client started. Once it has,
 * `release` writes the lines at their own levels, and later ones go through (a warning the server
 * gave as it started is still a warning). If it never did, `drop` writes them at debug, and every
 * later one too (the connection's close, the server's last words): the start that follows probes
 * the interpreter and says what is wrong, once. At most HELD_LINES lines, HELD_CHARS characters in
 * all, are held: a server may write without end, and a line of megabytes.
 */
export class HeldOutput {
  private mode: 'hold' | 'release' | 'drop' = 'hold';
  private held: { level: LogLevel; message: string; args: unknown[] }[] = [];
  private dropped = 0;
  private heldChars = 0;
  /** The channel to hand the client. */
  readonly channel: vscode.LogOutputChannel;

  constructor(private readonly target: vscode.LogOutputChannel) {
    this.channel = new Proxy(target, {
      get: (channel, property, receiver) => {
        const level = typeof property === 'string' && property in LEVEL_NAMES ? (property as LogLevel) : undefined;
        if (level !== undefined && this.mode !== 'release') {
          return (message: string | Error, ...args: unknown[]): void => this.write(level, message, args);
        }
        const value: unknown = Reflect.get(channel, property, receiver);
        return typeof value === 'function' ? value.bind(channel) : value;
      },
    });
  }

  /** True until `release`: what the client would show a user of a failure is not shown. */
  get quiet(): boolean {
    return this.mode !== 'release';
  }

  /** The client started: what it held, at its own levels, and what follows as it comes. */
  release(): void {
    this.end('release');
  }

  /** The client never started: what it held, and what follows, at debug. */
  drop(): void {
    this.end('drop');
  }

  private write(level: LogLevel, message: string | Error, args: unknown[]): void {
    const text = typeof message === 'string' ? message : String(message.stack ?? message);
    if (this.mode === 'hold' && this.held.length < HELD_LINES && this.heldChars + text.length <= HELD_CHARS) {
      this.heldChars += text.length;
      this.held.push({ level, message: text, args });
    } else if (this.mode === 'hold') {
      this.dropped += 1;
    } else {
      this.target[this.mode === 'drop' ? 'debug' : level](text, ...args);
    }
  }

  private end(mode: 'release' | 'drop'): void {
    if (this.mode !== 'hold') {
      return;
    }
    this.mode = mode;
    for (const { level, message, args } of this.held) {
      this.target[mode === 'drop' ? 'debug' : level](message, ...args);
    }
    this.held = [];
    if (this.dropped > 0) {
      this.target[mode === 'drop' ? 'debug' : 'warn'](`${this.dropped} more lines from the server's start were not kept`);
    }
  }
}
