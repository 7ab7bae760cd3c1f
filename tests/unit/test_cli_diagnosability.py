"""What the CLI says when it cannot do what was asked: a sessions root that is not there, a bad
log level, and the plain facts (--version, no match). Each message is read as a person reads it."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_reference import __version__
from dsh_session_reference.cli import BAD_SETTING, EXIT_ERROR, EXIT_USAGE, ROOT_NOT_FOUND
from dsh_session_reference.main import main
from dsh_session_reference.sample import write_sample_store
from store.logbuild import many_sessions


def _run(
    args: list[str], env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_session_reference", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize("command", [["candidates"], ["prepare", "-"], ["check", "README.md"]])
def test_a_missing_root_is_an_error_naming_the_path_and_where_it_came_from(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(""))
    assert main(["--sessions", str(missing), *command]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f'error: {ROOT_NOT_FOUND}: sessions root "{missing}" (from --sessions) does not exist\n'
    assert not missing.exists()  # nothing was created

    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    assert main(["--json", *command]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    assert json.loads(err) == {
        "error": {
            "code": ROOT_NOT_FOUND,
            "message": f'sessions root "{tmp_path / "home" / "sessions"}" (from $DSH_HOME) does not exist',
        }
    }

    monkeypatch.delenv("DSH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert main(command) == EXIT_ERROR
    expected = tmp_path / "user" / ".dsh" / "sessions"
    assert (
        capsys.readouterr().err
        == f'error: {ROOT_NOT_FOUND}: sessions root "{expected}" (dsh\'s default) does not exist\n'
    )


def test_a_file_as_root_is_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "sessions"
    a_file.write_text("")
    assert main(["--sessions", str(a_file), "candidates"]) == EXIT_ERROR
    assert capsys.readouterr().err.endswith(f'"{a_file}" (from --sessions) is not a directory\n')


def test_no_match_is_said_and_is_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sessions"
    write_sample_store(root, "none")
    assert main(["--sessions", str(root), "--no-index", "candidates", "no-session-is-called-this"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "no sessions match\n")


def test_version() -> None:
    run = _run(["--version"])
    assert (run.returncode, run.stdout) == (0, f"dsh-session-reference {__version__}\n")


def test_a_bad_log_level_is_a_usage_error_never_a_crash(tmp_path: Path) -> None:
    run = _run(["lsp"], env={"DSH_LSP_LOG": "loud"})
    assert run.returncode == EXIT_USAGE
    assert run.stderr == (
        f"error: {BAD_SETTING}: DSH_LSP_LOG must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (any case), "
        "not 'loud'\n"
    )
    flag = _run(["lsp", "--log-level", "loud"])
    assert flag.returncode == EXIT_USAGE and "invalid choice: 'LOUD'" in flag.stderr
    nowhere = _run(["lsp", "--log-file", str(tmp_path / "no" / "such" / "dir" / "log")])
    assert nowhere.returncode == EXIT_ERROR and "cannot write the log file" in nowhere.stderr
    # A FIFO nobody reads would block the open forever, a folder is no log: both refused at once.
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        refused = _run(["lsp", "--log-file", str(path)])
        assert refused.returncode == EXIT_ERROR, refused.stderr
        assert refused.stderr.startswith(f"error: IO_ERROR: cannot write the log file {str(path)!r}: "), (
            refused
        )
    assert _run(["lsp", "--log-file", str(fifo)]).stderr.endswith(": not a regular file\n")


def test_the_log_goes_to_the_file_at_the_level_asked(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    body = json.dumps({"jsonrpc": "2.0", "method": "exit"})
    frame = f"Content-Length: {len(body)}\r\n\r\n{body}"
    run = _run(
        ["lsp", "--log-level", "debug", "--log-file", str(log)], env={"DSH_LSP_LOG": "error"}, stdin=frame
    )
    assert run.stderr == ""  # all of it went to the file
    text = log.read_text()
    assert "DEBUG" in text, text
    quiet = tmp_path / "quiet.log"
    _run(["lsp", "--log-file", str(quiet)], env={"DSH_LSP_LOG": "Error"}, stdin=frame)
    assert "DEBUG" not in quiet.read_text() and "INFO" not in quiet.read_text()


def test_a_progress_line_shows_on_a_terminal_and_never_in_a_pipe(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    many_sessions(root, 3000)
    env = {**os.environ, "DSH_PROGRESS_AFTER": "0", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "dsh_session_reference", "--sessions", str(root), "candidates", "s-0001"]
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env)
        os.close(follower)
        shown = bytearray()
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closes with the process
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=120)
    finally:
        os.close(leader)
    assert process.returncode == 0
    text = shown.decode()
    assert "\rreading dsh sessions: " in text, text  # counts and a rate, redrawn in place
    assert re.search(r"reading dsh sessions: [\d,]+ \([\d,]+/s\)", text), text
    assert text.endswith("\r\x1b[K"), repr(text[-40:])  # erased when done: the output reads as without it
    assert b"s-00010" in stdout

    # The same command in a pipe: no progress at all.
    piped = subprocess.run(command, capture_output=True, env=env, timeout=120, check=False)
    assert piped.returncode == 0 and b"reading dsh sessions" not in piped.stderr


def test_an_empty_target_option_means_no_target_even_with_the_environment_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    write_sample_store(str(root), "none")
    listed = {"--json", "--sessions", str(root), "--no-index", "candidates"}
    assert (
        main([*sorted(listed, key=["--json", "--sessions", str(root), "--no-index", "candidates"].index)])
        == 0
    )
    every = {row["sessionId"] for row in json.loads(capsys.readouterr().out)}
    some = sorted(every)[0]
    monkeypatch.setenv("DSH_SESSION_ID", some)
    args = ["--json", "--sessions", str(root), "--no-index", "candidates"]
    assert main([*args]) == 0
    assert some not in {
        row["sessionId"] for row in json.loads(capsys.readouterr().out)
    }  # the environment's target
    assert main([*args, "--target", ""]) == 0
    assert some in {
        row["sessionId"] for row in json.loads(capsys.readouterr().out)
    }  # an empty --target: none
