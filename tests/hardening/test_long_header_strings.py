"""Strings from a log's header are bounded where they are kept; ``prepare`` still sends them whole.

Before (issue 35): a session's cwd was kept whole (titles were already cut at 1,024 characters):
three logs with an 8 MB cwd made the CLI peak at 713 MB and keep 343 MB. Upstream accepts such a
log (its project folder cuts the cwd's slug to 251 characters), lists it and sends the cwd whole
in the snapshot, so ``prepare`` must still do so. What is kept for listing, ranking and display
(the record, the index row, the listing a server leaves, candidate rows) is the first 4,096
characters and a SHA-256 of the whole, so a cut cwd ranks as equal to nothing but itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from dsh_session_reference.model import MAX_HEADER_CHARS, kept_text
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store.index.database import default_index_dir, index_file
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import header, lines, one_turn, put, title

BIG = 8 << 20


PEAK_SAID = """
import runpy, sys
try:
    runpy.run_module("dsh_session_reference", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"\\nVmHWM {peak}\\n")
"""
"""The CLI, saying its own peak RSS as it ends. Neither RUSAGE_CHILDREN (the largest child the test
worker ever reaped) nor a child's own rusage (Linux starts it at the forking process's peak, here
a test worker's hundreds of MB) measures the CLI alone; VmHWM is the peak of the process's own
memory since its ``exec``."""


def cli(root: Path, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The CLI's run and its peak RSS in MB."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)
    done = subprocess.run(
        [sys.executable, "-P", "-c", PEAK_SAID, "--sessions", str(root), "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    stderr, said = done.stderr.rsplit("\nVmHWM ", 1)
    done.stderr = stderr
    return done, int(said) / 1024


def long_cwd(fill: str, tail: str) -> str:
    return "/" + fill * (BIG // len(fill)) + tail


def write_root(root: Path) -> dict[str, str]:
    """Three sessions with 8 MB cwds (two of them sharing their first 8 MB), and one short one."""
    cwds = {
        "long-a": long_cwd("a", "/one"),
        "long-b": long_cwd("a", "/two"),
        "long-c": long_cwd("c", ""),
        "short": "/w",
    }
    for n, (session_id, cwd) in enumerate(cwds.items()):
        put(
            root,
            session_id,
            lines(header(session_id, cwd=cwd, createdAt=1000 + n), *one_turn(), title(4, session_id)),
            cwd=cwd,
        )
    an_hour_ago = time.time() - 3600
    for log in root.rglob("session.jsonl"):
        os.utime(log, (an_hour_ago, an_hour_ago))
    return cwds


def test_a_long_cwd_is_kept_bounded_and_prepared_whole(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    cwds = write_root(root)
    cache = tmp_path / "cache"
    for _ in range(2):  # the index is built, then read back
        listed, peak = cli(root, cache, "candidates")
        assert listed.returncode == 0, listed.stderr
        rows = {row["sessionId"]: row for row in json.loads(listed.stdout)}
        assert set(rows) == set(cwds)
        assert rows["short"]["cwd"] == "/w"
        for session_id in ("long-a", "long-b", "long-c"):
            assert rows[session_id]["cwd"] == kept_text(cwds[session_id])
            assert len(rows[session_id]["cwd"]) < MAX_HEADER_CHARS + 100
        assert len(listed.stdout) < 100_000
        assert peak < 200, f"peak {peak:.0f} MB"
    index = index_file(default_index_dir({"XDG_CACHE_HOME": str(cache)}), os.path.realpath(root))
    with sqlite3.connect(index) as database:
        [(biggest,)] = database.execute("SELECT max(length(listing)) FROM logs").fetchall()
    assert biggest < 20_000, biggest
    prompt = tmp_path / "prompt.md"
    prompt.write_text(format_session_reference_mention("long-b", "b"))
    prepared, _ = cli(root, cache, "prepare", "--max-reference-bytes", str(4 * BIG), str(prompt))
    assert prepared.returncode == 0, prepared.stderr
    text = json.loads(prepared.stdout)["additionalContext"]["content"][0]["text"]
    data = json.loads(text.split("<referenced-sessions>\n", 1)[1].split("\n</referenced-sessions>", 1)[0])
    assert data[0]["cwd"] == cwds["long-b"]  # what upstream sends: the header's cwd, whole


def test_a_cut_cwd_ranks_as_equal_only_to_itself(tmp_path: Path) -> None:
    """``long-a`` and ``long-b`` share their first 8 MB: ranked for a target in ``long-a``'s cwd,
    only ``long-a`` is in the same cwd (upstream's rank 0), by the CLI's target and by a cwd given
    whole (the server's, or a library caller's: the CLI's ``--cwd`` cannot be 8 MB long)."""
    root = tmp_path / "sessions"
    cwds = write_root(root)
    listed, _ = cli(root, tmp_path / "cache", "candidates", "--target", "long-a")
    assert listed.returncode == 0, listed.stderr
    # none in long-a's cwd: all "other cwd", newest first
    assert [row["sessionId"] for row in json.loads(listed.stdout)] == ["short", "long-c", "long-b"]
    for store in (JsonlSessionStore(root), IndexedSessionStore(root, index_dir=str(tmp_path / "index"))):
        resolver = SessionReferenceResolver(store)
        for session_id, cwd in cwds.items():
            rows = asyncio.run(resolver.list_candidates(AgentRef(None, cwd), ""))
            same = [row.session_id for row in rows if row.cwd == kept_text(cwd)]
            assert same == [session_id] and rows[0].session_id == session_id


def test_kept_text_is_bounded_idempotent_and_one_to_one() -> None:
    a, b = "x" * BIG + "1", "x" * BIG + "2"
    assert kept_text("/w") == "/w" and kept_text(kept_text(a)) == kept_text(a)
    assert kept_text(a) != kept_text(b) and kept_text(a).startswith("x" * MAX_HEADER_CHARS)
    assert AgentRef("t", a).cwd == kept_text(a)
