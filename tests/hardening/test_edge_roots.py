"""Roots that are missing, not a directory, or partly unreadable, through every face.

Unreadable files are tested honestly: the suite runs as root, which reads
through any mode bits, so every process that must meet a ``chmod 000`` runs
with the DAC-override capabilities dropped (:func:`audit.unprivileged`), and
the test first proves that such a process really cannot read a mode-000 file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from lsp_harness import lsp_session, server_pid
from lsp_support import default_specs, wait_until, write_store
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from dsh_session_reference.analysis import UNKNOWN_SESSION
from dsh_session_reference.cli import ROOT_NOT_FOUND
from dsh_session_reference.errors import READ_FAILED
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import header, lines, one_turn, put, title

from .audit import Audit, audited_env, audited_server_command, run_audited, unprivileged, vm_kb

NOT_FOUND = "SESSION_QUERY_SESSION_NOT_FOUND"
PERSISTENCE = "SESSION_QUERY_PERSISTENCE_FAILED"


def probe(root: Path, ids: list[str], log: Path, prefix: list[str] | None = None) -> dict[str, object]:
    run = run_audited([str(root), *ids], log, module="hardening.probe_store", prefix=prefix or [])
    assert run.returncode == 0, run.stderr
    result: dict[str, object] = json.loads(run.stdout)
    return result


def errors_of(diagnostics: list[types.Diagnostic]) -> list[tuple[str, str]]:
    return [(str(d.code), d.message) for d in diagnostics if d.severity == types.DiagnosticSeverity.Error]


async def test_a_missing_root_is_an_empty_store_everywhere(tmp_path: Path, workspace: Path) -> None:
    root = tmp_path / "no-such-root"
    result = probe(root, ["s"], tmp_path / "probe.log")
    assert result["listed"] == [] and result["candidates"] == {}
    assert result["reads"] == {"s": ["error", NOT_FOUND, 'session "s" not found']}
    message = 'failed to read referenced session: session "s" not found'
    assert result["prepared"] == {"s": ["error", READ_FAILED, message]}
    # The library keeps upstream's behaviour (an empty store, above); the CLI and the server say
    # plainly that the root is not there, with where its path came from.
    common = ["--sessions", str(root)]
    said = f'sessions root "{root}" (from --sessions) does not exist'
    listed = run_audited(["candidates", "--json", *common], tmp_path / "cli.log")
    assert (listed.returncode, listed.stdout) == (1, "")
    assert json.loads(listed.stderr) == {"error": {"code": ROOT_NOT_FOUND, "message": said}}
    human = run_audited(["candidates", *common], tmp_path / "cli.log")
    assert (human.returncode, human.stdout, human.stderr) == (1, "", f"error: {ROOT_NOT_FOUND}: {said}\n")
    document = tmp_path / "prompt.md"
    document.write_text(format_session_reference_mention("s"))
    prepared = run_audited(["prepare", *common, str(document)], tmp_path / "cli.log")
    assert (prepared.returncode, prepared.stderr) == (1, f"error: {ROOT_NOT_FOUND}: {said}\n")
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        completion = await s.complete(s.open(workspace, "@"))
        assert list(completion.items) == []
        await wait_until(lambda: any(str(root) in m.message for m in s.client.messages))
        shown = [m.message for m in s.client.messages if str(root) in m.message]
        assert len(shown) == 1 and "does not exist, so no sessions can be listed" in shown[0], shown
        doc = s.open(workspace, format_session_reference_mention("s"))
        [(code, text)] = errors_of(await s.diagnostics(doc))
        assert code == UNKNOWN_SESSION and message in text
    assert not root.exists()  # nothing created it


async def test_a_root_that_is_a_file_is_one_clear_error(tmp_path: Path, workspace: Path) -> None:
    root = tmp_path / "sessions"
    root.write_text("not a directory")
    expected = f"session persistence listing failed: ENOTDIR: not a directory, scandir '{root}'"
    result = run_audited([str(root), "s"], tmp_path / "probe.log", module="hardening.probe_store")
    assert result.returncode == 1 and expected in result.stderr  # listing itself fails, as documented
    listed = run_audited(["candidates", "--sessions", str(root)], tmp_path / "cli.log")
    said = f'sessions root "{root}" (from --sessions) is not a directory'
    assert (listed.returncode, listed.stderr) == (1, f"error: {ROOT_NOT_FOUND}: {said}\n")
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        completion = await s.complete(s.open(workspace, "@"))
        assert list(completion.items) == [] and completion.is_incomplete
        assert any(expected in m.message for m in s.client.log_messages)
        await wait_until(lambda: any("is not a directory" in m.message for m in s.client.messages))
        doc = s.open(workspace, format_session_reference_mention("s"))
        [(code, text)] = errors_of(await s.diagnostics(doc))
        assert code == UNKNOWN_SESSION and expected in text
    assert root.read_text() == "not a directory"


@pytest.fixture
def locked_root(tmp_path: Path) -> Iterator[Path]:
    """A root with a readable session, a mode-000 log, a mode-000 session directory, a
    mode-000 project directory and one that may be searched but not listed (mode 0311);
    modes are restored afterwards so the tree can be removed."""
    root = tmp_path / "sessions"
    for sid in ("readable", "unreadable-log", "unreadable-dir"):
        put(root, sid, lines(header(sid), *one_turn(), title(6, f"title of {sid}")))
    put(root, "hidden", lines(header("hidden", cwd="/locked"), *one_turn()), cwd="/locked")
    put(root, "searchable", lines(header("searchable", cwd="/search"), *one_turn()), cwd="/search")
    locked = {
        root / "--w--" / "unreadable-log" / "session.jsonl": 0,
        root / "--w--" / "unreadable-dir": 0,
        root / "--locked--": 0,
        root / "--search--": 0o311,
    }
    modes = {path: path.stat().st_mode for path in locked}
    for path, mode in locked.items():
        path.chmod(mode)
    try:
        yield root
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def test_dropping_privileges_really_enforces_file_modes(locked_root: Path) -> None:
    """Without this the unreadable-file tests below would prove nothing when run as root."""
    secret = locked_root / "--w--" / "unreadable-log" / "session.jsonl"
    code = "import sys\ntry:\n open(sys.argv[1]).close()\nexcept PermissionError:\n sys.exit(13)\n"
    attempt = subprocess.run([*unprivileged(), sys.executable, "-c", code, str(secret)], check=False)
    assert attempt.returncode == 13


async def test_unreadable_logs_and_directories_fail_only_themselves(
    locked_root: Path, tmp_path: Path, workspace: Path
) -> None:
    root = locked_root
    log_path = f"{root}/--w--/unreadable-log/session.jsonl"
    dir_log = f"{root}/--w--/unreadable-dir/session.jsonl.zstd"
    reasons = {
        "unreadable-log": f"session persistence listing failed: EACCES: permission denied, open '{log_path}'",
        "unreadable-dir": f"session persistence listing failed: EACCES: permission denied, stat '{dir_log}'",
        "hidden": 'session "hidden" not found',  # its project directory cannot be listed (logged)
        "searchable": 'session "searchable" not found',  # nor this one, though it may be searched
    }
    ids = ["readable", *reasons]
    result = probe(root, ids, tmp_path / "probe.log", unprivileged())
    assert result["listed"] == ["readable"]
    assert result["candidates"] == {"readable": "title of readable"}
    assert result["reads"] == {
        "readable": ["ok", 6, 2],
        **{
            sid: ["error", NOT_FOUND if sid in ("hidden", "searchable") else PERSISTENCE, reason]
            for sid, reason in reasons.items()
        },
    }
    prepared = result["prepared"]
    assert isinstance(prepared, dict) and prepared["readable"][0] == "ok"
    for sid, reason in reasons.items():
        assert prepared[sid] == ["error", READ_FAILED, f"failed to read referenced session: {reason}"]

    common = ["--sessions", str(root), "--json"]
    listed = run_audited(["candidates", *common], tmp_path / "cli.log", prefix=unprivileged())
    assert [row["sessionId"] for row in json.loads(listed.stdout)] == ["readable"]
    assert (
        f"skipping {root}/--locked--: EACCES: permission denied, scandir '{root}/--locked--'" in listed.stderr
    )
    for sid, reason in reasons.items():
        document = tmp_path / f"{sid}.md"
        document.write_text(format_session_reference_mention(sid))
        run = run_audited(["prepare", *common, str(document)], tmp_path / "cli.log", prefix=unprivileged())
        error = json.loads(run.stderr.splitlines()[-1])["error"]
        assert (run.returncode, error["message"]) == (1, f"failed to read referenced session: {reason}")

    log = tmp_path / "server.log"
    command = audited_server_command(unprivileged())
    async with lsp_session(command, audited_env(log), workspace, root) as s:
        labels = [item.label for item in (await s.complete(s.open(workspace, "@"))).items]
        assert labels == ["title of readable"]
        for sid, reason in reasons.items():
            doc = s.open(workspace, format_session_reference_mention(sid))
            [(code, text)] = errors_of(await s.diagnostics(doc))
            assert code == UNKNOWN_SESSION and reason in text
        doc = s.open(workspace, format_session_reference_mention("readable", "title of readable"))
        assert errors_of(await s.diagnostics(doc)) == []
    for path in (root / "--w--" / "unreadable-dir", root / "--locked--"):
        assert os.stat(path).st_mode & 0o777 == 0  # untouched (restored by the fixture afterwards)


EMPTY_PROJECTS = 1500
"""More than ``SYNC_MAX_SESSIONS`` (500), and than the watcher takes (1,000): it lists the root only."""


async def test_empty_project_directories_do_not_make_every_completion_walk(
    tmp_path: Path, workspace: Path
) -> None:
    """A root of a few sessions and many project directories that hold none (100,000 made every
    ``@`` take 1.2 s, 150,000 1.5-2.3 s): the big-root decision counted only session directories,
    so the root counted as small and each completion walked it on the spot. The directories a walk
    lists are what it costs; a root of them is served from memory and revalidated behind. The
    audit log shows each walk as a listing of every empty project directory: a burst of
    completions typed without a pause (background walks wait for one) must not walk per request."""
    root = write_store(tmp_path / "sessions", default_specs(str(workspace)), "none")
    for number in range(EMPTY_PROJECTS):
        (root / f"--empty-{number:05d}--").mkdir()
    log = tmp_path / "server.log"

    def walks() -> float:
        listed = [path for path in Audit.read(log).paths(["os.scandir"]) if "--empty-" in path]
        return len(listed) / EMPTY_PROJECTS

    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        uri = s.open(workspace, "@")
        assert "Deploy checklist" in [item.label for item in (await s.complete(uri)).items]
        before = walks()
        slowest = 0.0
        for letter in "deploy":
            s.type_text(uri, letter)
            asked = time.monotonic()
            labels = [item.label for item in (await s.complete(uri)).items]
            slowest = max(slowest, time.monotonic() - asked)
            assert "Deploy checklist" in labels
        during = walks() - before
        assert during <= 1, f"{during:.1f} walks of the root for 6 completions"  # it was one each
        assert slowest < 1.0
        assert vm_kb(server_pid(s), "VmHWM") < 300 * 1024


def fifo_root(path: Path) -> Path:
    os.mkfifo(path)
    return path


def loop_root(path: Path) -> Path:
    os.symlink(path, path)  # a link to itself: every stat of it is ELOOP
    return path


def file_root(path: Path) -> Path:
    path.write_text("not a directory")
    return path


@pytest.mark.parametrize("make", [file_root, fifo_root, loop_root], ids=["file", "fifo", "symlink loop"])
async def test_every_request_over_a_root_that_is_no_directory_says_so(
    tmp_path: Path, workspace: Path, make: Callable[[Path], Path]
) -> None:
    """Before (issue 35): ``workspace/symbol``, the candidates and transcript commands and
    ``workspace/textDocumentContent`` of a transcript answered InternalError (-32603, a traceback).
    Each now says what the CLI says, with its code: the root and why it cannot be one."""
    root = make(tmp_path / "sessions")
    log = tmp_path / "server.log"
    transcript = "dsh-transcript:/Title.txt?" + "0198c2a4-7b1e-7c3d-9f00-123456789abc"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        doc = s.open(workspace, "@")
        requests: dict[str, Callable[[], Awaitable[object]]] = {
            "workspace/symbol": lambda: s.client.workspace_symbol_async(
                types.WorkspaceSymbolParams(query="")
            ),
            "candidates": lambda: s.command("dshSessionReference.candidates", {"documentUri": doc}),
            "transcript": lambda: s.command("dshSessionReference.transcript", transcript),
            "textDocumentContent": lambda: s.client.workspace_text_document_content_async(
                types.TextDocumentContentParams(uri=transcript)
            ),
        }
        for name, request in requests.items():
            with pytest.raises(JsonRpcException) as raised:
                await request()
            error = raised.value
            assert error.code != types.ErrorCodes.InternalError, (name, error)
            message = str(error)
            assert ROOT_NOT_FOUND in message and str(root) in message, (name, message)
            assert "Traceback" not in message, (name, message)
        completion = await s.complete(doc)
        assert list(completion.items) == []
