"""``dsh-session-reference``: the service for scripts, CI and terminals.

A thin front end: every subcommand calls the same functions the language
server uses. Human-readable output by default, ``--json`` for scripts (stdout
then holds exactly one JSON document, or nothing when the command fails); a
failure prints its code and message on stderr and exits 1 (2 for usage and
for a missing optional package). Warnings about skipped logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from . import __version__, assembly
from .cancellation import AbortSignal
from .config import ResolverConfig, resolver_config
from .display import display_label, readable_time
from .dsh_profile import combine_limits
from .errors import SessionReferenceError
from .jsjson import js_normalize, read_text
from .logsetup import LOG_ENV, LOG_LEVELS, log_level, progress_after
from .logsetup import configure as configure_log
from .model import SessionSource, StoreError
from .resolver import AgentRef, BodyCandidate, SessionReferenceResolver, agent_for_target
from .uri import (
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_prompt_text,
)

EXIT_ERROR = 1
PROGRESS_EVERY = 0.2
"""Seconds between redraws of the terminal progress line."""
EXIT_USAGE = 2
MISSING_PACKAGE = "MISSING_PACKAGE"
ROOT_NOT_FOUND = assembly.ROOT_NOT_FOUND
BAD_SETTING = "BAD_SETTING"
STORE_COMMANDS = ("candidates", "prepare", "check")
"""The commands that read the sessions root: a root that is not there is an error for them."""


def _common(*, subcommand: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (after wins).

    argparse copies everything a sub-command's parser sets over what the main
    parser already parsed, defaults included, so with real defaults in the
    sub-commands' copies ``--sessions DIR candidates`` would lose ``DIR`` to
    ``None``. Their copies therefore set nothing unless given (``SUPPRESS``);
    only the main parser's copy supplies the defaults.
    """

    def default(value: object) -> object:
        return argparse.SUPPRESS if subcommand else value

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable JSON output"
    )
    common.add_argument(
        "--sessions",
        metavar="DIR",
        default=default(None),
        help="dsh sessions root (default: $DSH_HOME/sessions or ~/.dsh/sessions)",
    )
    common.add_argument(
        "--no-index",
        action="store_true",
        default=default(False),
        help="read every log afresh instead of using the title index in the cache folder",
    )
    return common


def _limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        metavar="ID",
        default=None,
        help="the session the message is written for (default: $DSH_SESSION_ID; none excludes nothing)",
    )
    parser.add_argument(
        "--cwd",
        default=None,
        help="cwd used for ranking when the target is not in the store (default: the current directory)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        default=None,
        help="the dsh profile whose budgets apply when no flag sets them "
        "($DSH_HOME/profiles/NAME/cordis.patch.yml; default: web)",
    )
    budget = "default: the dsh profile's, else dsh's"
    parser.add_argument("--max-references", type=int, default=None, metavar="N", help=f"1..3 ({budget} 3)")
    parser.add_argument("--candidate-limit", type=int, default=None, metavar="N", help=f"{budget} 50")
    parser.add_argument("--max-reference-bytes", type=int, default=None, metavar="N", help=f"{budget} 65536")


def build_parser() -> argparse.ArgumentParser:
    common = _common(subcommand=True)
    parser = argparse.ArgumentParser(
        prog="dsh-session-reference",
        description="Mention dsh sessions as @[label](dsh-session:...) and prepare their bounded snapshots.",
        parents=[_common(subcommand=False)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    candidates = commands.add_parser("candidates", parents=[common], help="list sessions to mention, ranked")
    candidates.add_argument(
        "query", nargs="?", default="", help="case-insensitive id, cwd or title substring"
    )
    candidates.add_argument(
        "--limit", type=int, default=None, help="at most this many (default: candidate limit)"
    )
    candidates.add_argument(
        "--body-search",
        action="store_true",
        help="also match message text (listed after the id/cwd/title matches, marked as body matches)",
    )
    _limits(candidates)

    prepare = commands.add_parser(
        "prepare", parents=[common], help="parse a message and prepare the snapshot the model would see"
    )
    prepare.add_argument("file", help="message text file, or - for standard input")
    _limits(prepare)

    parse = commands.add_parser("parse", parents=[common], help="replace mentions with @label and list them")
    parse.add_argument("file", help="text file, or - for standard input")

    uri = commands.add_parser("uri", parents=[common], help="encode or decode a dsh-session: URI")
    uri_commands = uri.add_subparsers(dest="uri_command", required=True, metavar="ACTION")
    uri_commands.add_parser("encode", parents=[common], help="session id -> URI").add_argument("session_id")
    uri_commands.add_parser("decode", parents=[common], help="URI -> session id").add_argument("uri")

    sample = commands.add_parser("sample-store", parents=[common], help="write a sample dsh sessions root")
    sample.add_argument("dir", help="a new or empty directory")
    sample.add_argument(
        "--compression",
        choices=("zstd", "none"),
        default="zstd",
        help="log encoding: zstd (.jsonl.zstd, dsh's default) or none (plain .jsonl)",
    )

    check = commands.add_parser(
        "check", parents=[common], help="report invalid mentions and references that prepare would reject"
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    _limits(check)

    commands.add_parser("demo", parents=[common], help="play a scripted editor session against the server")

    lsp = commands.add_parser("lsp", parents=[common], help="run the language server over stdio")
    lsp.add_argument(
        "--stdio", action="store_true", help="accepted for vscode-languageclient; stdio is the default"
    )
    lsp.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=None,
        help=f"what the server logs to stderr or --log-file (default: ${LOG_ENV} or WARNING)",
    )
    lsp.add_argument(
        "--log-file", metavar="PATH", default=None, help="append the log to this file instead of stderr"
    )
    return parser


def _read(path: str) -> str:
    """A message as ``check`` and the editor read it: UTF-8, undecodable bytes as U+FFFD."""
    if path == "-":
        return js_normalize(sys.stdin.buffer.read().decode("utf-8", errors="replace"))
    return read_text(path)


@contextlib.contextmanager
def _terminal_progress(args: argparse.Namespace, store: SessionSource) -> Iterator[None]:
    """A progress line on stderr while the store is walked, when stderr is a terminal and the
    work runs past :func:`.logsetup.progress_after` (a cold root of thousands of logs takes
    seconds): how many sessions were read and how fast. Nothing when piped or with ``--json``;
    the line is erased when the work ends, so the output reads as without it."""
    if args.json or not sys.stderr.isatty():
        yield
        return
    done = AbortSignal()  # the work ended: the line goes

    def draw() -> None:
        started = time.monotonic()
        if done.wait(progress_after()):
            return
        while True:
            walked = store.walked_sessions
            rate = walked / max(time.monotonic() - started, 1e-3)
            sys.stderr.write(f"\rreading dsh sessions: {walked:,} ({rate:,.0f}/s)\x1b[K")
            sys.stderr.flush()
            if done.wait(PROGRESS_EVERY):
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
                return

    drawer = threading.Thread(target=draw, name="dsh-progress", daemon=True)
    drawer.start()
    try:
        yield
    finally:
        done.abort()
        drawer.join()


_FLAGS = (
    ("maxReferences", "max_references", "--max-references"),
    ("candidateLimit", "candidate_limit", "--candidate-limit"),
    ("maxReferenceBytes", "max_reference_bytes", "--max-reference-bytes"),
)


def _budgets(args: argparse.Namespace) -> ResolverConfig:
    """A flag's budget, else dsh's profile's, else dsh's default, each with where it came from.

    The flags keep upstream's range (any positive safe integer): they are the user's own, typed for
    one run, unlike the language server's settings, which a repository may reach (those are
    clamped, see ``config.BUDGET_BOUNDS``). A bad flag fails with upstream's message."""
    resolver_config(args.max_references, args.candidate_limit, args.max_reference_bytes)
    profile = assembly.dsh_profile_budgets(args.profile)
    for warning in profile.warnings:
        logging.getLogger(__name__).warning("%s", warning)
    own = {key: (getattr(args, attribute), flag) for key, attribute, flag in _FLAGS}
    given = {key: chosen for key, chosen in own.items() if chosen[0] is not None}
    return combine_limits(given, profile, bounded=False)[0]


@contextlib.asynccontextmanager
async def _resolving(
    args: argparse.Namespace, *, every_title: bool = False
) -> AsyncIterator[tuple[SessionReferenceResolver, AgentRef]]:
    """The resolver over the root (the title index, cold logs replayed on every core, or the plain
    store) and the agent a message is written for, with the progress line shown while the work
    inside runs."""
    body_search = getattr(args, "body_search", False)
    store = assembly.open_source(
        args.root, index=not args.no_index, body_search=body_search, every_title=every_title
    )
    resolver = assembly.make_resolver(store, _budgets(args), body_search=body_search)
    with _terminal_progress(args, store):
        # An explicit empty ``--target ""`` means no target, as before ``$DSH_SESSION_ID`` is looked at.
        target = args.target if args.target is not None else assembly.target_session(None)
        cwd = args.cwd if args.cwd is not None else os.getcwd()
        yield resolver, await agent_for_target(store, target, cwd)


_TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]|\r(?!\n)")


def _terminal_escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (``os.fsdecode``)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code > 0xFF else f"\\x{code:02x}"


def _terminal_text(text: str) -> str:
    """Human output as a terminal may show it: C0/C1 controls (ESC above all) as ``\\xNN``, the
    odd bytes of a file name that is not UTF-8 as ``\\xNN`` and other lone surrogates as ``\\uXXXX``.

    Titles, cwds, ids, directory names and message text come from session logs
    and folders anyone could have written; printed raw they could recolour,
    retitle or rewrite the terminal. Line breaks and tabs stay. JSON output is
    left exact (JSON escapes C0).
    """
    return _TERMINAL_CONTROL.sub(lambda match: _terminal_escape(match.group()), text)


class _TerminalFormatter(logging.Formatter):
    """Warnings (a skipped log names its path, header id and reason) escaped like all human output."""

    def format(self, record: logging.LogRecord) -> str:
        return _terminal_text(super().format(record))


def _log_to_terminal() -> None:
    """Warnings to stderr, escaped; once per process (``main`` may run more than once in one)."""
    root = logging.getLogger()
    if any(isinstance(handler.formatter, _TerminalFormatter) for handler in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_TerminalFormatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def _emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


async def _candidates(args: argparse.Namespace) -> int:
    # A query is matched against every title.
    async with _resolving(args, every_title=args.query != "") as (resolver, agent):
        found = await resolver.list_candidates(agent, args.query, args.limit)
    if args.json:
        _emit([dict(candidate.to_json(), mention=candidate.mention) for candidate in found])
        return 0
    for candidate in found:
        label = display_label(candidate.label)
        where = display_label(candidate.cwd) if candidate.cwd is not None else "(no cwd)"
        shown_id = display_label(candidate.session_id)
        print(f"{label}\n    {shown_id} · {where} · {readable_time(candidate.created_at)}")
        print(f"    {format_session_reference_mention(candidate.session_id, label)}")
        if isinstance(candidate, BodyCandidate):
            print(f"    matched in messages: “{display_label(candidate.snippet)}”")
    if not found:
        print("no sessions match", file=sys.stderr)
    return 0


async def _prepare(args: argparse.Namespace) -> int:
    from .report import render_prepared_report

    parsed = parse_prompt_text(_read(args.file))
    async with _resolving(args) as (resolver, agent):
        prepared = await resolver.prepare(agent, [{"type": "text", "text": parsed.text}], parsed.references)
    if args.json:
        context = prepared.additional_context
        _emit(
            {
                "content": prepared.content,
                "additionalContext": None if context is None else context.to_json(),
            }
        )
        return 0
    sys.stdout.write(_terminal_text(render_prepared_report(parsed.text, prepared, resolver.config)) + "\n")
    return 0


def _parse(args: argparse.Namespace) -> int:
    parsed = parse_prompt_text(_read(args.file))
    if args.json:
        _emit({"text": parsed.text, "references": [r.to_json() for r in parsed.references]})
        return 0
    sys.stdout.write(parsed.text if parsed.text.endswith("\n") else parsed.text + "\n")
    for reference in parsed.references:
        print(_terminal_text(f"  @{reference.label} -> {reference.session_id}"), file=sys.stderr)
    return 0


def _uri(args: argparse.Namespace) -> int:
    if args.uri_command == "encode":
        result = encode_session_reference_uri(args.session_id)
        key = "uri"
    else:
        result = decode_session_reference_uri(args.uri)
        key = "sessionId"
    if args.json:
        _emit({key: result})
    else:
        print(result)
    return 0


def _missing_zstandard(args: argparse.Namespace, writes: str, remedy: str) -> int | None:
    """Exit status 2 and a one-line error when no Zstandard codec can be imported, else ``None``.

    Writing ``.jsonl.zstd`` logs needs one (it is imported lazily so plain logs work without
    it). Asking before anything is written spares the user a traceback and a root with an empty
    log in it.
    """
    reason = assembly.zstd_missing()
    if reason is None:
        return None
    return _fail(args, MISSING_PACKAGE, f"{writes} .jsonl.zstd logs, but {reason}: {remedy}", EXIT_USAGE)


def _sample_store(args: argparse.Namespace) -> int:
    from .sample import write_sample_store

    if args.compression == "zstd":
        missing = _missing_zstandard(
            args,
            "sample-store writes",
            "install one (pip install backports.zstd) or pass --compression none to write plain .jsonl logs",
        )
        if missing is not None:
            return missing
    summary = write_sample_store(args.dir, args.compression)
    if args.json:
        _emit(summary)
    else:
        print(f"wrote a sample dsh sessions root to {args.dir}")
    return 0


async def _check(args: argparse.Namespace) -> int:
    from .check import check_files

    async with _resolving(args) as (resolver, agent):
        return await check_files(args.files, resolver, agent, as_json=args.json)


def _demo(args: argparse.Namespace, run_demo: Callable[[str | None], int]) -> int:
    if args.sessions is None:  # the built-in sample store is written as .jsonl.zstd
        missing = _missing_zstandard(
            args,
            "demo writes its built-in sample store as",
            "install one (pip install backports.zstd), or write a plain sample root with "
            "`dsh-session-reference sample-store --compression none DIR` "
            "and run `dsh-session-reference demo --sessions DIR`",
        )
        if missing is not None:
            return missing
    return run_demo(args.sessions)


def _lsp(args: argparse.Namespace, serve_stdio: Callable[[str | None], int]) -> int:
    try:
        level = log_level(args.log_level)
    except ValueError as error:
        return _fail(args, BAD_SETTING, str(error), EXIT_USAGE)
    try:
        configure_log(level, args.log_file)
    except OSError as error:
        reason = error.strerror or str(error)
        return _fail(args, "IO_ERROR", f"cannot write the log file {args.log_file!r}: {reason}")
    assembly.lead_own_process_session()  # before the spare worker, which stays in the server's session
    assembly.start_spare_worker()
    return serve_stdio(args.sessions)


def main(
    argv: Sequence[str] | None,
    *,
    serve_stdio: Callable[[str | None], int],
    run_demo: Callable[[str | None], int],
) -> int:
    """Run one command. What ``lsp`` and ``demo`` run is given by the program (:mod:`.main`): the
    CLI sits beside the language server on the core and does not import it (nor pay for its
    imports on store commands)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            # A JS id may hold a lone surrogate, which UTF-8 cannot carry: it is written as
            # its escape (valid inside JSON strings, readable elsewhere) instead of a traceback.
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and args.command == "demo":
        parser.error("demo has no JSON output; run it without --json")
    if args.command != "lsp":  # the server's log is the editor's, set up by the server
        _log_to_terminal()
    if args.command in STORE_COMMANDS:
        root = args.root = assembly.sessions_root(args.sessions)
        failure = assembly.root_failure(root, assembly.root_origin(args.sessions, "from --sessions"))
        if failure is not None:
            return _fail(args, ROOT_NOT_FOUND, failure)
    try:
        match args.command:
            case "candidates":
                return asyncio.run(_candidates(args))
            case "prepare":
                return asyncio.run(_prepare(args))
            case "parse":
                return _parse(args)
            case "uri":
                return _uri(args)
            case "sample-store":
                return _sample_store(args)
            case "check":
                return asyncio.run(_check(args))
            case "demo":
                return _demo(args, run_demo)
            case "lsp":
                return _lsp(args, serve_stdio)
    except (SessionReferenceError, StoreError) as error:
        return _fail(args, error.code, error.message)
    except BrokenPipeError:
        return _reader_left()
    except OSError as error:
        return _fail(args, "IO_ERROR", f"{error.strerror or error}: {error.filename or ''}".rstrip(": "))
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE


def _reader_left() -> int:
    """``... | head`` closed our stdout: nothing more to say, and no traceback when Python flushes
    stdout at exit (Python's note on SIGPIPE: point stdout at devnull)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_ERROR


def _fail(args: argparse.Namespace, code: str, message: str, status: int = EXIT_ERROR) -> int:
    """Report a failure on stderr (one JSON line under ``--json``) and return the exit status."""
    if getattr(args, "json", False):
        sys.stderr.write(json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False) + "\n")
    else:
        sys.stderr.write(_terminal_text(f"error: {code}: {message}") + "\n")
    return status
