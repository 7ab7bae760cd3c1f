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
