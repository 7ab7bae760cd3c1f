"""Logs deleted, truncated or appended to while they are read.

dsh writes its logs while this server reads them. The store reads a log as it
was when opened (it is append-only), re-reads it when it shrank meanwhile (a
repair truncating a torn tail) and never reports a state the file never had.

The store-level tests are deterministic: the change is made from inside a real
read, at a chunk boundary, through the ``stop`` event the store checks between
chunks (an event that is never set but acts when checked). The other faces
meet a live writer: a thread appends real turns (with torn partial writes and
zstd frames written in halves) while the resolver, the CLI and the language
server read in a loop; every read must succeed and never go backwards.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lsp_harness import lsp_session

from dsh_session_reference.cancellation import AbortSignal
from dsh_session_reference.errors import SessionReferenceError
from dsh_session_reference.model import StoreError
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.logbase import READ_CHUNK
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import frame, header, lines, one_turn, put

from .audit import audited_env, audited_server_command, run_audited
from .conftest import scaled

TURN_LINES = 6


class ActOnCheck(AbortSignal):
    """A signal that never stops a read; at chosen checks it changes the file instead."""

    def __init__(self, action: Callable[[], None], at: Callable[[int], bool]) -> None:
        super().__init__()
        self.checks = 0
        self.action = action
        self.at = at

    def check(self) -> None:
        self.checks += 1
        if self.at(self.checks):
            self.action()


def big_log(sid: str, turns: int) -> bytes:
    """A plain log of ``turns`` complete turns, each with a 2 KB question (several read chunks)."""
    body = [line for n in range(turns) for line in one_turn(n * TURN_LINES, "q" * 2000, f"a{n}")]
    return lines(header(sid), *body)


def captured(turns: int) -> int:
    return turns * TURN_LINES - 1


def checks_in_a_read(store: JsonlSessionStore, sid: str) -> int:
    counter = ActOnCheck(lambda: None, lambda _: False)
    store.read_surface(sid, counter)
    return counter.checks


@pytest.fixture
def grown(tmp_path: Path) -> tuple[JsonlSessionStore, Path, int]:
    """A 2000-turn (~4 MB, several chunks) log and how many stop checks one read of it makes."""
    root = tmp_path / "sessions"
    path = Path(put(root, "s", big_log("s", 2000)))
    assert path.stat().st_size > 3 * READ_CHUNK
    store = JsonlSessionStore(root)
    return store, path, checks_in_a_read(store, "s")


def test_a_log_deleted_while_read_is_read_as_opened(grown: tuple[JsonlSessionStore, Path, int]) -> None:
    store, path, checks = grown
    snapshot = store.read_surface("s", ActOnCheck(path.unlink, lambda n: n == checks - 2))
    assert snapshot.captured_through_seq == captured(2000) and not path.exists()
    with pytest.raises(StoreError, match='session "s" not found'):
        store.read_surface("s")


def test_a_log_truncated_while_read_is_read_again(grown: tuple[JsonlSessionStore, Path, int]) -> None:
    store, path, checks = grown
    cut = len(big_log("s", 700))  # a committed boundary, as a repair leaves the log
    event = ActOnCheck(lambda: os.truncate(path, cut), lambda n: n == checks - 2)
    snapshot = store.read_surface("s", event)
    assert snapshot.captured_through_seq == captured(700)
    assert len(snapshot.events) == 2 * 700
    assert event.checks > checks  # it really read twice


def test_a_log_that_keeps_shrinking_fails_clearly(grown: tuple[JsonlSessionStore, Path, int]) -> None:
    store, path, _ = grown
    sizes = iter(range(path.stat().st_size - 1000, 0, -50_000))

    def shrink() -> None:
        size = next(sizes, None)
        if size is not None:
            os.truncate(path, size)

    with pytest.raises(StoreError) as caught:
        store.read_surface("s", ActOnCheck(shrink, lambda n: n >= 3))  # at every chunk of every attempt
    assert caught.value.message == 'failed to inspect session "s": the log kept shrinking while it was read'


def test_a_log_appended_to_while_read_is_read_as_opened(grown: tuple[JsonlSessionStore, Path, int]) -> None:
    store, path, checks = grown

    def append() -> None:
        with path.open("ab") as handle:
            handle.write(lines(*one_turn(captured(2000) + 1, "later", "later answer")))

    snapshot = store.read_surface("s", ActOnCheck(append, lambda n: n == checks - 2))
    assert snapshot.captured_through_seq == captured(2000)
    assert store.read_surface("s").captured_through_seq == captured(2001)


def test_a_zstd_log_appended_to_while_read_is_read_as_opened(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    frames = [frame(lines(header("z")))] + [
        frame(lines(*one_turn(n * TURN_LINES, "q" * 2000, f"a{n}"))) for n in range(40)
    ]
    path = Path(put(root, "z", b"".join(frames), "zstd"))
    store = JsonlSessionStore(root)
    checks = checks_in_a_read(store, "z")
    late = frame(lines(*one_turn(captured(40) + 1, "late", "late answer")))

    def append() -> None:
        with path.open("ab") as handle:
            handle.write(late[: len(late) // 2])  # a torn frame first, as a crash would leave it

    snapshot = store.read_surface("z", ActOnCheck(append, lambda n: n == checks // 2))
    assert snapshot.captured_through_seq == captured(40)
    assert store.read_surface("z").captured_through_seq == captured(40)  # the torn frame holds no record
    with path.open("ab") as handle:
        handle.write(late[len(late) // 2 :])
    assert store.read_surface("z").captured_through_seq == captured(41)


class Writer(threading.Thread):
    """dsh appending turns to a plain and a zstd log, torn writes included, until stopped."""

    def __init__(self, plain: Path, zstd: Path) -> None:
        super().__init__(daemon=True)
        self.plain, self.zstd = plain, zstd
        self.turns = 1
        self.done = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.done.is_set():
                seq = self.turns * TURN_LINES
                data = lines(*one_turn(seq, f"question {self.turns}", f"answer {self.turns}"))
                framed = frame(data)
                for path, payload in ((self.plain, data), (self.zstd, framed)):
                    with path.open("ab") as handle:
                        handle.write(payload[: len(payload) // 2])
                        handle.flush()
                        time.sleep(0.001)  # a reader may see the torn half
                        handle.write(payload[len(payload) // 2 :])
                if self.turns % 25 == 0:  # a crash and its repair: a torn tail, truncated away
                    size = self.plain.stat().st_size
                    with self.plain.open("ab") as handle:
                        handle.write(b'{"type":"turn/start","seq":')
                    time.sleep(0.002)
                    os.truncate(self.plain, size)
                self.turns += 1
                time.sleep(0.02)
        except BaseException as error:
            self.failure = error


@pytest.fixture
def live(tmp_path: Path) -> tuple[Path, Writer]:
    root = tmp_path / "sessions"
    plain = Path(put(root, "plain", lines(header("plain"), *one_turn())))
    zstd = Path(put(root, "zstd", frame(lines(header("zstd"))) + frame(lines(*one_turn())), "zstd"))
    return root, Writer(plain, zstd)


def assert_monotonic(seen: list[int]) -> None:
    assert seen == sorted(seen), seen  # mid-turn reads count the recovery closers, so any seq may show


async def test_readers_of_live_logs_never_fail_or_go_backwards(
    live: tuple[Path, Writer], tmp_path: Path, workspace: Path
) -> None:
    root, writer = live
    resolver = SessionReferenceResolver(JsonlSessionStore(root))
    agent = AgentRef(None, "/w")
    document = tmp_path / "prompt.md"
    text = f"{format_session_reference_mention('plain')} and {format_session_reference_mention('zstd')}"
    document.write_text(text)
    seen: dict[str, list[int]] = {"plain": [], "zstd": [], "cli": [], "lsp": []}
    log = tmp_path / "server.log"
    writer.start()
    try:
        async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
            deadline = time.monotonic() + scaled(3)
            rounds = 0
            while time.monotonic() < deadline or rounds < 3:
                rounds += 1
                for sid in ("plain", "zstd"):
                    prepared = await resolver.prepare(agent, [], [{"sessionId": sid}])
                    assert prepared.additional_context is not None
                    seen[sid].append(
                        prepared.additional_context.source["references"][0]["capturedThroughSeq"]
                    )
                cli = run_audited(
                    ["prepare", "--json", "--sessions", str(root), str(document)], tmp_path / "c.log"
                )
                assert cli.returncode == 0, cli.stderr
                references = json.loads(cli.stdout)["additionalContext"]["source"]["references"]
                seen["cli"].append(min(reference["capturedThroughSeq"] for reference in references))
                preview = await s.command("dshSessionReference.preview", s.open(workspace, text))
                assert preview["ok"] is True, preview["summary"]
                summary = await s.command("dshSessionReference.documentSummary", s.open(workspace, text))
                assert summary["errors"] == 0
                seen["lsp"].append(rounds)
            writer.done.set()
            writer.join(10)
            assert writer.failure is None
            store = JsonlSessionStore(root)
            final = captured(writer.turns)
            assert store.read_surface("plain").captured_through_seq == final
            assert store.read_surface("zstd").captured_through_seq == final
            # dsh deletes a session: every face says so at its next read.
            writer.zstd.unlink()
            with pytest.raises(SessionReferenceError, match='session "zstd" not found'):
                await resolver.prepare(agent, [], [{"sessionId": "zstd"}])
            cli = run_audited(["prepare", "--sessions", str(root), str(document)], tmp_path / "c.log")
            assert (cli.returncode, cli.stderr.splitlines()[-1]) == (
                1,
                'error: SESSION_REFERENCE_READ_FAILED: failed to read referenced session: session "zstd" not found',
            )
            gone = await s.diagnostics(s.open(workspace, text), lambda found: len(found) > 0)
            assert [d.code for d in gone] == ["unknown-session"]
    finally:
        writer.done.set()
        writer.join(10)
    for sid in ("plain", "zstd"):
        assert_monotonic(seen[sid])
        assert len(set(seen[sid])) > 1, "the writer never got ahead of the readers"
