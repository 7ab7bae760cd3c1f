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
