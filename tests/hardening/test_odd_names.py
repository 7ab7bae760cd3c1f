"""Names that are not UTF-8 and text with lone surrogates reach the index without bringing it down.

POSIX file names are bytes: a project folder named ``bad\\xff`` or a root under
a Latin-1 ``caf\\xe9`` path decodes to a string with lone surrogates, which
SQLite's text refuses; a message may carry ``"\\ud83d"`` as valid JSON text.
The index keys paths by their bytes and indexes message text as JS would encode
it, and any failed write rolls its transaction back, so the next one works.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from lsp_harness import lsp_session

from dsh_session_reference.store.index.database import IndexDatabase
from dsh_session_reference.store.index.rows import Fingerprint, IndexRow, fingerprint, fingerprint_of
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import header, lines, one_turn, put, title

from .audit import audited_env, audited_server_command, run_audited

HEALTHY = ("alpha", "beta")


def session(sid: str, cwd: str, question: str = "hi") -> bytes:
    return lines(header(sid, cwd=cwd), *one_turn(0, question, "ok"), title(6, f"Title of {sid}"))


def healthy_root(parent: Path, name: bytes = b"sessions") -> Path:
    root = Path(os.fsdecode(os.path.join(os.fsencode(parent), name)))
    for sid in HEALTHY:
        put(root, sid, session(sid, "/w"), cwd="/w")
    return root


def odd_project(root: Path, sid: str = "alpha") -> Path:
    """A copy of a healthy session in a project folder whose name is not UTF-8."""
    project = Path(os.fsdecode(os.path.join(os.fsencode(root), b"bad\xff")))
    source = next(root.glob(f"*/{sid}"))
    shutil.copytree(source, project / sid)
    return project


def listed(run_stdout: str) -> list[str]:
    return sorted(row["sessionId"] for row in json.loads(run_stdout))


def test_a_project_folder_that_is_not_utf8_hides_nothing(tmp_path: Path) -> None:
    root = healthy_root(tmp_path)
    odd_project(root)
    (tmp_path / "prompt.md").write_text(format_session_reference_mention("alpha"))
    log = tmp_path / "cli.log"
    for attempt in ("cold", "warm"):
        run = run_audited(["--sessions", str(root), "--json", "candidates"], log)
        assert run.returncode == 0, (attempt, run.stderr)
        assert listed(run.stdout) == sorted(HEALTHY), attempt
        assert "bad\\xff" in run.stderr  # the copy is skipped, and said to be
        prepared = run_audited(
            ["--sessions", str(root), "--json", "prepare", str(tmp_path / "prompt.md")], log
        )
        assert prepared.returncode == 0, (attempt, prepared.stderr)


def test_a_root_under_a_latin1_path_works_in_every_face(tmp_path: Path) -> None:
    root = healthy_root(tmp_path, b"caf\xe9")
    (tmp_path / "prompt.md").write_text(format_session_reference_mention("beta"))
    log = tmp_path / "cli.log"
    for attempt in ("cold", "warm"):
        run = run_audited(["--sessions", os.fsdecode(root), "--json", "candidates", "title"], log)
        assert run.returncode == 0, (attempt, run.stderr)
        assert listed(run.stdout) == sorted(HEALTHY), attempt
        prepared = run_audited(["--sessions", os.fsdecode(root), "prepare", str(tmp_path / "prompt.md")], log)
        assert prepared.returncode == 0, (attempt, prepared.stderr)


async def test_the_server_lists_a_latin1_root_and_keeps_writing_its_index(
    tmp_path: Path, workspace: Path
) -> None:
    root = healthy_root(tmp_path, b"caf\xe9")
    odd_project(root, "beta")
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        first = await s.complete(s.open(workspace, "@"))
        assert sorted(item.label for item in first.items) == ["Title of alpha", "Title of beta"]
        put(root, "gamma", session("gamma", "/w"), cwd="/w")  # a later index write must work too
        second = await s.complete(s.open(workspace, "@gam"))
        assert [item.label for item in second.items] == ["Title of gamma"]


def test_a_lone_surrogate_in_a_message_leaves_body_search_working(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "odd", session("odd", "/w", "zebra \ud83d crossing"), cwd="/w")
    put(root, "plain", session("plain", "/w", "zebra stripes"), cwd="/w")
    log = tmp_path / "cli.log"
    for attempt in ("cold", "warm"):
        run = run_audited(["--sessions", str(root), "--json", "candidates", "--body-search", "zebra"], log)
        assert run.returncode == 0, (attempt, run.stderr)
        assert listed(run.stdout) == ["odd", "plain"], attempt
        crossing = run_audited(
            ["--sessions", str(root), "--json", "candidates", "--body-search", "crossing"], log
        )
        assert listed(crossing.stdout) == ["odd"], attempt


@pytest.fixture
def database(tmp_path: Path) -> IndexDatabase:
    return IndexDatabase(str(tmp_path / "index.sqlite3"), "/r/caf\udce9")


def a_log(path: Path) -> tuple[str, Fingerprint]:
    """A log file at ``path`` and its fingerprint (the index keeps a row only for a log that is there)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    return str(path), fingerprint_of(os.lstat(path))


def test_paths_of_any_bytes_round_trip_through_the_index(database: IndexDatabase, tmp_path: Path) -> None:
    made = [
        a_log(tmp_path / "bad\udcff" / "s" / "session.jsonl"),
        a_log(tmp_path / "caf\udce9" / "x" / "session.jsonl"),
    ]
    database.write({path: IndexRow(fp, listing="{}", listing_ns=9) for path, fp in made})
    assert sorted(database.load()[0]) == sorted(path for path, _ in made)
    assert database.load_row(made[0][0]) == IndexRow(made[0][1], listing="{}", listing_ns=9)
    surrogate = "/r/\ud83d/session.jsonl"  # no file system names it; the index still keeps it
    database.write({surrogate: IndexRow(fingerprint(1, 2, 3, 4, 5), listing="{}", listing_ns=9)})
    assert database.load_row(surrogate) == IndexRow(fingerprint(1, 2, 3, 4, 5), listing="{}", listing_ns=9)
    database.put_body(surrogate, fingerprint(1, 2, 3, 4, 5), "zebra \ud83d crossing")
    assert [path for path, _ in database.search_bodies('"crossing"*', 5)] == [surrogate]


def test_a_failed_write_rolls_back_and_the_next_write_lands(database: IndexDatabase, tmp_path: Path) -> None:
    a, b, c = (a_log(tmp_path / name / "s" / "session.jsonl") for name in "abc")
    refused = IndexRow(a[1], listing="\ud800 is no text to SQLite", listing_ns=9)
    database.write({a[0]: refused, b[0]: IndexRow(b[1])})  # logged, not raised
    assert database.load() == ({}, True)
    database.write({c[0]: IndexRow(c[1])})
    assert list(database.load()[0]) == [c[0]]
