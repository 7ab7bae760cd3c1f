"""The CLI and the language server on a Python where no Zstandard codec can be imported.

The server reads zstd logs with Python 3.14's ``compression.zstd``, its backport
``backports.zstd``, or the ``zstandard`` binding (store/zstd_codec.py); an older
Python on a platform without those wheels has none. Plain ``.jsonl`` logs must still
work there; a ``.jsonl.zstd`` log must fail like any unreadable log, naming itself
and what to install, without hiding the healthy session or ending the server.

The codecs are blocked honestly: a directory ahead of site-packages (and of the
standard library) on ``PYTHONPATH`` holds ``zstandard``, ``backports/zstd`` and
``compression`` packages whose import raises ``ImportError``, as a binding without
its compiled backend does. The first test proves the block works, so the others
cannot pass by accident.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsp_support import Spec, write_store
from lsprotocol import types

from dsh_session_reference.cli import EXIT_USAGE, MISSING_PACKAGE
from dsh_session_reference.errors import READ_FAILED
from dsh_session_reference.sample import SAMPLE_SESSION_IDS
from dsh_session_reference.uri import format_session_reference_mention

from .audit import audited_env, audited_server_command, run_audited

PLAIN_ID = "plain-session"
ZSTD_ID = "zstd-session"
PLAIN_TITLE = "Plain log title"
ZSTD_TITLE = "Compressed log title"
MISSING = "no Zstandard decoder is installed (Python 3.14+, or the package backports.zstd or zstandard)"
BLOCKED = ("zstandard", "backports.zstd", "compression.zstd")


@pytest.fixture(scope="module")
def blocker(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ``PYTHONPATH`` entry that shadows every codec with a package that fails to import."""
    directory = tmp_path_factory.mktemp("no-zstandard")
    for name in ("zstandard", "backports/zstd", "compression"):
        package = directory / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f'raise ImportError("{name} is blocked by this test")\n')
    return str(directory)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    """One plain and one zstd log (a mixed root: each log is read in its own encoding)."""
    path = tmp_path_factory.mktemp("sessions")
    cwd = str(workspace)
    write_store(path, [Spec(PLAIN_ID, cwd, PLAIN_TITLE, [("user", "the plain one")])], "none")
    write_store(path, [Spec(ZSTD_ID, cwd, ZSTD_TITLE, [("user", "the compressed one")])], "zstd")
    return path


def zstd_log(root: Path) -> Path:
    [log] = root.glob("*/*/session.jsonl.zstd")
    return log


def unreadable(root: Path) -> str:
    """The message every face reports for the zstd log."""
    return f'cannot read "{zstd_log(root)}": {MISSING}'


@pytest.mark.parametrize("module", BLOCKED)
def test_the_blocker_really_blocks_each_codec(tmp_path: Path, blocker: str, module: str) -> None:
    env = audited_env(tmp_path / "audit.log", {"PYTHONPATH": blocker})
    probe = [sys.executable, "-c", f"import {module}"]
    blocked = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert blocked.returncode == 1 and "is blocked by this test" in blocked.stderr, blocked.stderr
    if module == "compression.zstd" and sys.version_info < (3, 14):
        return  # nothing to unblock before 3.14
    unblocked = subprocess.run(
        probe,
        env=audited_env(tmp_path / "audit.log"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unblocked.returncode == 0, unblocked.stderr  # the suite's own Python has both backends


def test_no_server_module_imports_zstandard_when_imported() -> None:
    """Every module of the package imports without touching a codec (one is loaded on first use)."""
    script = (
        "import importlib, pkgutil, sys\n"
        "import dsh_session_reference as package\n"
        "names = [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.')]\n"
        "for name in names:\n"
        "    if not name.endswith('.__main__'):\n"
        "        importlib.import_module(name)\n"
        "codecs = ('zstandard', 'backports.zstd', 'compression.zstd')\n"
        "print(len(names), any(codec in sys.modules for codec in codecs))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    count, imported = result.stdout.split()
    assert int(count) > 20 and imported == "False"


@pytest.mark.parametrize("index", [[], ["--no-index"]], ids=["indexed", "no-index"])
def test_cli_lists_the_plain_session_and_names_the_zstd_log(
    tmp_path: Path, blocker: str, root: Path, index: list[str]
) -> None:
    common = ["--sessions", str(root), "--target", "none", *index]
    extra = {"PYTHONPATH": blocker}
    listed = run_audited(["candidates", "--json", *common], tmp_path / "cli.log", env=extra)
    assert listed.returncode == 0, listed.stderr
    assert [(c["sessionId"], c["label"]) for c in json.loads(listed.stdout)] == [(PLAIN_ID, PLAIN_TITLE)]
    skipped = f"skipping {zstd_log(root)}: {unreadable(root)}"
    assert skipped in listed.stderr.splitlines()
    assert listed.audit.writes_under(root) == []

    prompt = tmp_path / "prompt.md"
    prompt.write_text(f"see {format_session_reference_mention(PLAIN_ID)}\n")
    prepared = run_audited(["prepare", "--json", *common, str(prompt)], tmp_path / "cli.log", env=extra)
    assert prepared.returncode == 0, prepared.stderr
    assert "the plain one" in json.loads(prepared.stdout)["additionalContext"]["content"][0]["text"]

    prompt.write_text(f"see {format_session_reference_mention(ZSTD_ID)}\n")
    failed = run_audited(["prepare", "--json", *common, str(prompt)], tmp_path / "cli.log", env=extra)
    assert failed.returncode == 1, failed.stdout
    *warnings, last = failed.stderr.splitlines()  # the skipped log is reported once, before the error
    assert warnings == [skipped]
    error = json.loads(last)["error"]
    assert error["code"] == READ_FAILED and error["message"].endswith(unreadable(root))


def test_sample_store_and_demo_name_the_package_and_the_way_on(tmp_path: Path, blocker: str) -> None:
    """They write ``.jsonl.zstd`` by default: without the binding, one line saying what to do, not a traceback."""
    extra = {"PYTHONPATH": blocker}
    out = tmp_path / "sample"
    refused = run_audited(["sample-store", str(out)], tmp_path / "cli.log", env=extra)
    assert (refused.returncode, refused.stdout) == (EXIT_USAGE, "")
    assert refused.stderr == (
        f"error: {MISSING_PACKAGE}: sample-store writes .jsonl.zstd logs, but {MISSING}: "
        "install one (pip install backports.zstd) or pass --compression none to write plain .jsonl logs\n"
    )
    assert not out.exists()  # refused before anything was written
    as_json = run_audited(["sample-store", "--json", str(out)], tmp_path / "cli.log", env=extra)
    assert (as_json.returncode, as_json.stdout) == (EXIT_USAGE, "")
    assert json.loads(as_json.stderr)["error"]["code"] == MISSING_PACKAGE

    demo = run_audited(["demo"], tmp_path / "cli.log", env=extra)
    assert (demo.returncode, demo.stdout) == (EXIT_USAGE, "")
    [line] = demo.stderr.splitlines()
    assert line.startswith(f"error: {MISSING_PACKAGE}: demo writes its built-in sample store as .jsonl.zstd")
    assert "sample-store --compression none DIR" in line and "demo --sessions DIR" in line

    # The way on that both name works on this Python.
    written = run_audited(
        ["sample-store", "--compression", "none", str(out)], tmp_path / "cli.log", env=extra
    )
    assert written.returncode == 0, written.stderr
    assert len(list(out.glob("*/*/session.jsonl"))) == len(SAMPLE_SESSION_IDS)
    assert not list(out.glob("*/*/session.jsonl.zstd"))
    played = run_audited(["demo", "--sessions", str(out)], tmp_path / "cli.log", env=extra)
    assert played.returncode == 0, played.stderr
    assert "demo finished" in played.stdout


async def test_server_completes_the_plain_session_and_reports_the_zstd_log(
    tmp_path: Path, blocker: str, root: Path, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    env = audited_env(tmp_path / "server.log", {"PYTHONPATH": blocker})
    async with lsp_session(audited_server_command(), env, workspace, root) as s:
        completion = await s.complete(s.open(workspace, "@"))
        labels = [item.label for item in completion.items]
        assert PLAIN_TITLE in labels and ZSTD_TITLE not in labels, labels
        doc = s.open(workspace, f"{format_session_reference_mention(ZSTD_ID)}\n")
        errors = [
            d.message
            for d in await s.diagnostics(doc, lambda found: bool(found))
            if d.severity == types.DiagnosticSeverity.Error
        ]
        assert len(errors) == 1 and unreadable(root) in errors[0], errors
        again = await s.complete(s.open(workspace, "see @"))  # still serving after the failure
        assert PLAIN_TITLE in [item.label for item in again.items]
    # lsp_session has checked the clean shutdown; the server's stderr reached ours.
    assert f"skipping {zstd_log(root)}: {unreadable(root)}" in capfd.readouterr().err


def test_a_zstd_log_read_from_its_own_handle_fails_the_same_way(
    tmp_path: Path, blocker: str, root: Path
) -> None:
    """A caller that opens a log itself (not through the store) gets the same :class:`LogError`."""
    script = (
        "import sys\n"
        "from dsh_session_reference.store.logfile import LogError, read_log\n"
        "class Ignore:\n"
        "    def push(self, event): pass\n"
        "    def push_chunks(self, first_seq, times): pass\n"
        "with open(sys.argv[1], 'rb') as handle:\n"
        "    try:\n"
        "        read_log(handle, 'zstd', lambda header: Ignore())\n"
        "    except LogError as error:\n"
        "        print(error.message)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(zstd_log(root))],
        env=audited_env(tmp_path / "audit.log", {"PYTHONPATH": blocker}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"cannot read Zstandard session logs (.jsonl.zstd): {MISSING}\n"
