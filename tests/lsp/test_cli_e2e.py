"""The CLI faces of the LSP layer, run as a user runs them: ``check`` and ``demo``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lsp_support import TARGET_ID

from dsh_session_reference.uri import format_session_reference_mention


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_session_reference", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_check_reports_what_the_editor_flags(tmp_path: Path, store_root: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text(f"see {format_session_reference_mention('s-alpha', 'Refactor the parser')}\n")
    bad = tmp_path / "bad.md"
    bad.write_text(f"one\n{format_session_reference_mention(TARGET_ID)} dsh-session:MTIz\n")
    ok = run("check", "--sessions", str(store_root), str(good), env={"DSH_SESSION_ID": TARGET_ID})
    assert ok.returncode == 0, ok.stderr
    failed = run(
        "check", "--sessions", str(store_root), str(good), str(bad), env={"DSH_SESSION_ID": TARGET_ID}
    )
    assert failed.returncode == 1
    lines = failed.stdout.splitlines()
    assert lines[0].startswith(
        f'{bad}:2:1: error: session "The prompt being written" cannot reference itself'
    )
    assert lines[1].startswith(f"{bad}:2:") and lines[1].endswith("[malformed-uri]")
    as_json = run(
        "check", "--json", "--sessions", str(store_root), str(bad), env={"DSH_SESSION_ID": TARGET_ID}
    )
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert [d["code"] for d in report["files"][0]["diagnostics"]] == ["self-reference", "malformed-uri"]


def test_demo_plays_the_whole_session_in_seconds() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in (
        "== 2. Type @",
        "Cart rounding: integer cents",
        "error [noncanonical-uri]",
        "applying: Use session",
        "(no problems)",
        "mentioning it costs",
        "Byte accounting",
        "What the model reads of it:",
        "demo finished",
    ):
        assert expected in out


def test_a_reader_that_stops_early_gets_no_error(store_root: Path) -> None:
    """``dsh-session-reference candidates | head``: a closed pipe ends the command quietly."""
    for args in (["candidates"], ["--json", "candidates"], ["candidates", "a"]):
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_session_reference", "--sessions", str(store_root), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first line is written
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) == 1
        assert stderr == "", stderr
