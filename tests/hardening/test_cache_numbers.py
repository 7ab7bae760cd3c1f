"""Numbers and JSON read back from the cache folder: a forged value means "rebuild", never a crash.

Anything running as the user can write the index, with CRC-32s that hold (issue 35): a
fingerprint of 5,000 digits passed ``isdecimal()``, then ``int()`` raised ``ValueError`` (Python's
limit on converting long digit strings), which the rebuild path did not catch, so every
``candidates`` failed with a traceback until the cache was deleted by hand; a listing entry nested
past Python's stack raised ``RecursionError`` the same way. Each forged row must cost a rebuild
(or the row) and nothing more, run after run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_session_reference.sample import write_sample_store
from dsh_session_reference.store.index.database import default_index_dir, index_file
from dsh_session_reference.store.index.kept import LISTING_VERSION, kept_listing
from dsh_session_reference.store.index.rows import fingerprint_at, fp_numbers, key_path, row_crc
from dsh_session_reference.store.jsvalue import js_parse_line
from dsh_session_reference.store.log_header import parse_header_meta

TARGET = "0198c2a4-7b1e-7c3d-9f00-123456789abc"
MENTION = "see @[x](dsh-session:IjAxOThjMmE0LTdiMWUtN2MzZC05ZjAwLTEyMzQ1Njc4OWFiYyI)\n"

Row = tuple[str, str | None, int, str | None, int]
"""fp, listing, listing_ns, title, title_ns"""

FORGERIES: dict[str, Callable[[Row], Row]] = {
    "fingerprint of 5,000 digits": lambda row: ("9" * 5000 + ":1:2:3:4", *row[1:]),
    "listing entry nested 100,000 deep": lambda row: (row[0], "[" * 100_000, *row[2:]),
    "title entry nested 100,000 deep": lambda row: (*row[:3], '{"i":' * 50_000, row[4]),
    "createdAt of 10**30": lambda row: (
        row[0],
        None if row[1] is None else row[1].replace('"createdAt":', '"createdAt":' + "1" + "0" * 30, 1),
        *row[2:],
    ),
}


def cli(root: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)
    return subprocess.run(
        [sys.executable, "-P", "-m", "dsh_session_reference", "--sessions", str(root), "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def stable(output: str) -> object:
    """A command's JSON without the one value that differs run to run (the context message's id)."""
    value = json.loads(output)
    if isinstance(value, dict):
        value["additionalContext"].pop("id")
    return value


def forge(cache: Path, root: Path, change: Callable[[Row], Row]) -> int:
    """Every row of the index rewritten by ``change``, with a checksum that holds."""
    path = index_file(default_index_dir({"XDG_CACHE_HOME": str(cache)}), os.path.realpath(root))
    forged = 0
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as database:
        rows = database.execute("SELECT path, fp, listing, listing_ns, title, title_ns FROM logs").fetchall()
        for key, *values in rows:
            fp, listing, listing_ns, title, title_ns = change(tuple(values))  # type: ignore[arg-type]
            crc = row_crc(key_path(key), fp, listing, listing_ns, title, title_ns)
            database.execute(
                "UPDATE logs SET fp = ?, listing = ?, listing_ns = ?, title = ?, title_ns = ?, crc = ? "
                "WHERE path = ?",
                (fp, listing, listing_ns, title, title_ns, crc, key),
            )
            forged += 1
        database.execute("DELETE FROM listing")
    return forged


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_number_or_nesting_in_an_index_row_means_rebuild(tmp_path: Path, forgery: str) -> None:
    root = Path(write_sample_store(tmp_path / "sessions", "none"))
    two_hours_ago = time.time() - 7200
    for log in root.rglob("session.jsonl"):
        os.utime(log, (two_hours_ago, two_hours_ago))
    prompt = tmp_path / "prompt.md"
    prompt.write_text(MENTION)
    cache = tmp_path / "cache"
    commands = [("candidates", "--target", TARGET), ("candidates", "cart"), ("prepare", str(prompt))]
    clean = [cli(root, cache, *command) for command in commands]
    assert [run.returncode for run in clean] == [0, 0, 0], [run.stderr for run in clean]
    for attempt in range(3):
        assert forge(cache, root, FORGERIES[forgery]) == 7
        for command, expected in zip(commands, clean, strict=True):
            run = cli(root, cache, *command)
            assert "Traceback" not in run.stderr, (attempt, command, run.stderr)
            assert (run.returncode, stable(run.stdout)) == (0, stable(expected.stdout)), (
                attempt,
                command,
                run.stderr,
            )


Entry = list[object]


def kept_document(root: Path, change: Callable[[Entry], bytes]) -> bytes:
    """A kept listing of ``root``'s first log as a server writes it, its entry's line made by ``change``."""
    log = min(root.rglob("session.jsonl"))
    fp = fingerprint_at(str(log))
    assert fp is not None
    header = json.loads(log.read_text().split("\n", 1)[0])
    header.pop("type")
    entry: Entry = [str(log.relative_to(root)), list(fp_numbers(fp)), header, ["a title", None]]
    head = json.dumps({"v": LISTING_VERSION, "d": 1}, separators=(",", ":")).encode()
    return head + b"\n" + change(entry) + b"\n"


def as_written(entry: Entry) -> bytes:
    return json.dumps(entry).encode()


def with_header(key: str, value: object) -> Callable[[Entry], bytes]:
    return lambda entry: as_written([entry[0], entry[1], {**entry[2], key: value}, entry[3]])  # type: ignore[dict-item]


KEPT_FORGERIES: dict[str, Callable[[Entry], bytes]] = {
    # 40 KB, under the 64 KiB a line may have; Python's json recurses once per level
    "an entry nested 20,000 deep": lambda entry: b"[" * 20_000 + b"]" * 20_000,
    "a header nested 20,000 deep": lambda entry: as_written(entry).replace(
        b'"createdAt"', b'"x":' + b"[" * 20_000 + b"]" * 20_000 + b',"createdAt"'
    ),
    "createdAt of 10**30": with_header("createdAt", 10**30),
    "a negative createdAt": with_header("createdAt", -1),
    "a fingerprint number of 10**30": lambda entry: as_written(
        [entry[0], [10**30, *entry[1][1:]], *entry[2:]]
    ),  # type: ignore[index]
}


@pytest.mark.parametrize("forgery", KEPT_FORGERIES)
def test_a_forged_line_of_the_kept_listing_refuses_the_listing(tmp_path: Path, forgery: str) -> None:
    """The listing a server leaves is read a line at a time (64 KiB at most): a line that no walk
    writes refuses the document (the rows answer instead), whatever the line makes ``json`` do."""
    root = Path(write_sample_store(tmp_path / "sessions", "none"))
    kept = kept_listing([kept_document(root, as_written)], str(root))
    assert kept is not None and len(kept.records) == 1  # the document as a server writes it is read
    assert kept_listing([kept_document(root, KEPT_FORGERIES[forgery])], str(root)) is None


@pytest.mark.parametrize(
    "first",
    [b"[" * 60_000, b'{"v":%d,"d":1' % LISTING_VERSION + b"0" * 30 + b"}"],
    ids=["nested", "10**30"],
)
def test_a_forged_first_line_of_the_kept_listing_refuses_the_listing(tmp_path: Path, first: bytes) -> None:
    assert kept_listing([first + b"\n"], str(tmp_path)) is None


def test_numbers_of_5000_digits_in_a_log_read_as_javascript_reads_them() -> None:
    """The same class of input in a log (audited with the cache, issue 35): ``JSON.parse`` reads
    5,000 digits as Infinity, which no check upstream makes accepts, and so do we (no
    ``ValueError`` from ``int()``); nesting past the stack is an unparsable line."""
    big = "9" * 5000
    assert js_parse_line(f'{{"seq":{big},"x":-{big}.5,"y":1e{big}}}'.encode()) == {
        "seq": math.inf,
        "x": -math.inf,
        "y": math.inf,
    }
    header = '{"type":"session","version":0,"id":"a","createdAt":%s,"delegationDepth":0}'
    assert parse_header_meta(header % "1") is not None
    assert parse_header_meta(header % big) is None  # not a safe integer: the session is hidden, as upstream
    with pytest.raises(ValueError, match="nesting"):
        js_parse_line(b"[" * 100_000)
