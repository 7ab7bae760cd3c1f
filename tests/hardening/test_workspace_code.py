"""A workspace folder is untrusted: nothing it holds may run in the CLI, the server or their workers.

Editors start the language server with a working directory, and people run the
CLI inside a cloned repository. ``python -m`` puts the working directory first on
``sys.path`` (and an empty ``PYTHONPATH`` entry does too), so a repository holding
``pickle.py`` or a ``dsh_session_reference/`` package would run its own code in
our processes. Each planted module here records that it ran in a marker file; the
tests check that the work really reached a worker process (its own audited pid)
and that no marker appeared.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from lsp_harness import lsp_session

from dsh_session_reference.store.index.store import APART_READ_BYTES
from dsh_session_reference.store.workers import worker_command, worker_environment
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import put

from .audit import STDLIB_PLANTS, Audit, audited_env, console_script, plant, run_audited
from .test_changing_logs import big_log


def worker_pids(audit: Audit) -> set[int]:
    pids = {int(event["pid"]) for event in audit.events}
    assert len(pids) >= 2, "no worker process ran: the test would prove nothing"
    return pids


@pytest.fixture(scope="module")
def huge_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root whose one session is read for ``prepare`` in a worker process (over 8 MB of JSONL)."""
    root = tmp_path_factory.mktemp("sessions")
    path = put(root, "huge", big_log("huge", 4500))
    assert os.path.getsize(path) > APART_READ_BYTES
    return root


def test_the_cli_in_a_planted_workspace_runs_none_of_it(huge_root: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    workspace = plant(tmp_path / "repo", STDLIB_PLANTS, marker, package=True)
    (workspace / "prompt.md").write_text(format_session_reference_mention("huge"))
    log = tmp_path / "cli.log"
    run = run_audited(
        ["--sessions", str(huge_root), "--json", "prepare", "prompt.md"],
        log,
        program=console_script(),
        cwd=workspace,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["additionalContext"]["source"]["references"][0]["sessionId"] == "huge"
    worker_pids(run.audit)
    assert not marker.exists(), marker.read_text()


def test_python_dash_m_in_a_planted_workspace_imports_nothing_more_from_it(
    huge_root: Path, tmp_path: Path
) -> None:
    """``python -m dsh_session_reference`` takes the package from the working directory (``-m``
    itself does that, documented), but nothing after it: not the standard library, not a worker."""
    marker = tmp_path / "ran.txt"
    workspace = plant(tmp_path / "repo", STDLIB_PLANTS, marker)
    (workspace / "prompt.md").write_text(format_session_reference_mention("huge"))
    run = run_audited(
        ["--sessions", str(huge_root), "prepare", "prompt.md"], tmp_path / "m.log", cwd=workspace
    )
    assert run.returncode == 0, run.stderr
    worker_pids(run.audit)
    assert not marker.exists(), marker.read_text()


async def test_the_server_in_a_planted_workspace_runs_none_of_it(huge_root: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    workspace = plant(tmp_path / "repo", STDLIB_PLANTS, marker, package=True)
    log = tmp_path / "server.log"
    command = [*console_script(), "lsp", "--stdio"]
    async with lsp_session(command, audited_env(log), workspace, huge_root, cwd=workspace) as s:
        uri = s.open(workspace, format_session_reference_mention("huge") + " ")
        preview = await s.command("dshSessionReference.preview", uri)
        assert preview["ok"] is True
        completion = await s.complete(s.open(workspace, "@hu"))
        assert [item.label for item in completion.items] == ["huge"]
    worker_pids(Audit.read(log))
    assert not marker.exists(), marker.read_text()


def test_a_worker_drops_every_entry_that_means_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), "relative", *sys.path])
    command = worker_command()
    assert command[1:3] == ["-P", "-s"]
    path = json.loads(command[-1])
    assert "" not in path and str(tmp_path) not in path and "relative" not in path
    assert all(os.path.isabs(entry) for entry in path)
    env = worker_environment(
        {"PYTHONPATH": os.pathsep.join(["", "/abs/one", "rel", str(tmp_path), "/abs/two"])}
    )
    assert env["PYTHONPATH"] == os.pathsep.join(["/abs/one", "/abs/two"])
    assert "PYTHONPATH" not in worker_environment({"PYTHONPATH": os.pathsep})
