"""The CLI's options and output streams, on real roots.

* The shared options (``--sessions``, ``--json``, ``--no-index``) work before
  or after the command name, the later one winning: argparse lets a
  sub-command's defaults overwrite what the main parser read, which once made
  ``--sessions DIR candidates`` list the default root instead of ``DIR``.
* A skipped log is reported once per command run, on stderr.
* Under ``--json``, stdout holds exactly one JSON document, or nothing when the
  command fails; the failure is one JSON line at the end of stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_reference.cli import EXIT_USAGE, ROOT_NOT_FOUND, build_parser
from dsh_session_reference.main import main
from dsh_session_reference.sample import SAMPLE_SESSION_IDS
from dsh_session_reference.uri import format_session_reference_mention
from zstd_backends import by_compression, zstd

from .logbuild import header, lines, one_turn, put, title

COMMANDS: dict[str, list[str]] = {
    "candidates": ["candidates"],
    "prepare": ["prepare", "m.md"],
    "parse": ["parse", "m.md"],
    "uri encode": ["uri", "encode", "an-id"],
    "uri decode": ["uri", "decode", "dsh-session:Ingi"],
    "sample-store": ["sample-store", "out"],
    "check": ["check", "m.md"],
    "demo": ["demo"],
    "lsp": ["lsp"],
}
# option -> (namespace attribute, argument values, parsed value when given, default)
SHARED: dict[str, tuple[str, list[str], object, object]] = {
    "--sessions": ("sessions", ["/given"], "/given", None),
    "--json": ("json", [], True, False),
    "--no-index": ("no_index", [], True, False),
}


def parsed(argv: list[str], attribute: str) -> object:
    return getattr(build_parser().parse_args(argv), attribute)


@pytest.mark.parametrize("option", SHARED)
@pytest.mark.parametrize("command", COMMANDS)
def test_shared_options_are_read_before_and_after_the_command(command: str, option: str) -> None:
    attribute, values, given, default = SHARED[option]
    argv = COMMANDS[command]
    assert parsed(argv, attribute) == default
    assert parsed([option, *values, *argv], attribute) == given
    assert parsed([*argv, option, *values], attribute) == given
    if command.startswith("uri "):  # between the two command names too
        assert parsed([argv[0], option, *values, *argv[1:]], attribute) == given


@pytest.mark.parametrize("command", COMMANDS)
def test_the_value_after_the_command_wins(command: str) -> None:
    argv = COMMANDS[command]
    assert parsed(["--sessions", "/before", *argv, "--sessions", "/after"], "sessions") == "/after"


def write_session(root: Path, session_id: str, cwd: str, label: str, text: str = "hi") -> None:
    put(
        root,
        session_id,
        lines(header(session_id, cwd=cwd), *one_turn(question=text), title(6, label)),
        cwd=cwd,
    )


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The default root ($DSH_HOME/sessions) and another root, each holding one session of its own."""
    home = tmp_path / "dsh-home"
    write_session(home / "sessions", "home-session", "/w", "In the default root")
    chosen = tmp_path / "chosen"
    write_session(chosen, "chosen-session", "/w", "In the chosen root")
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.delenv("DSH_SESSION_ID", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return home / "sessions", chosen


def listed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(argv) == 0
    return [row["sessionId"] for row in json.loads(capsys.readouterr().out)]


def test_candidates_read_the_root_given_on_either_side(
    roots: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    default, chosen = (str(root) for root in roots)
    query = ["candidates", "--target", "none"]
    assert listed([*query, "--json"], capsys) == ["home-session"]  # the default root is really there
    assert listed(["--sessions", chosen, "--json", *query], capsys) == ["chosen-session"]
    assert listed([*query, "--sessions", chosen, "--json"], capsys) == ["chosen-session"]
    assert listed(["--sessions", default, "--json", *query, "--sessions", chosen], capsys) == [
        "chosen-session"
    ]
    assert listed(["--sessions", chosen, "--json", *query, "--sessions", default], capsys) == ["home-session"]


def test_no_index_before_the_command_keeps_the_index_unwritten(
    tmp_path: Path, roots: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chosen = str(roots[1])
    index_dir = tmp_path / "cache" / "dsh-session-reference" / "index"
    argv = ["candidates", "--target", "none", "--json"]
    assert listed(["--no-index", "--sessions", chosen, *argv], capsys) == ["chosen-session"]
    assert not index_dir.exists()
    assert listed(["--sessions", chosen, *argv], capsys) == ["chosen-session"]
    assert list(index_dir.glob("*.sqlite3"))


@by_compression
def test_sample_store_writes_the_chosen_encoding(
    tmp_path: Path, compression: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sample"
    assert main(["--json", "sample-store", str(out), "--compression", compression]) == 0
    assert json.loads(capsys.readouterr().out) == str(out)
    name = "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"
    assert sorted(path.name for path in out.glob("*/*/*")) == [name] * len(SAMPLE_SESSION_IDS)


# --- subprocess runs: stderr as a user sees it (logging's own handler, not pytest's) --------------

GOOD = "good-session"
BAD = "bad-session"
GOOD_TEXT = "the healthy session's question"


@pytest.fixture(scope="module")
def damaged_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One healthy plain log and one ``.jsonl.zstd`` log that is not Zstandard (skipped when listed)."""
    root = tmp_path_factory.mktemp("damaged")
    write_session(root, GOOD, "/w", "Healthy title", GOOD_TEXT)
    bad = put(root, BAD, b"this is not a zstd frame\n", "zstd")
    return root, f"skipping {bad}: corrupt Zstandard session log: invalid frame magic at byte 0"


def run(args: list[str], cache: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)
    result = subprocess.run(
        [sys.executable, "-m", "dsh_session_reference", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def prompt(tmp_path: Path, session_id: str) -> str:
    path = tmp_path / f"{session_id}.md"
    path.write_text(f"see {format_session_reference_mention(session_id)}\n")
    return str(path)


@zstd
@pytest.mark.parametrize("index", [[], ["--no-index"]], ids=["indexed", "no-index"])
def test_each_skipped_log_is_reported_once_per_run(
    tmp_path: Path, damaged_root: tuple[Path, str], index: list[str]
) -> None:
    root, skipped = damaged_root
    common = ["--sessions", str(root), *index, "--target", "none"]
    good, bad = prompt(tmp_path, GOOD), prompt(tmp_path, BAD)
    cache = tmp_path / "cache"
    runs = {  # what each run reports; a run that never looks at the bad log reports nothing
        "candidates": (["candidates", *common], [skipped]),
        "body search": (["candidates", "healthy session", "--body-search", *common], [skipped]),
        "prepare": (["prepare", good, *common], []),  # finds its target and source, lists nothing
        "prepare the skipped": (["prepare", bad, *common], [skipped]),
        "check": (["check", good, bad, *common], [skipped]),
    }
    for attempt in ("cold", "warm"):  # a warm index replays the listing it stored
        for name, (args, expected) in runs.items():
            result = run(args, cache)
            warnings = [line for line in result.stderr.splitlines() if line.startswith("skipping ")]
            assert warnings == expected, (attempt, name, result.stderr)
    assert GOOD_TEXT in run(["prepare", good, *common], cache).stdout  # the healthy session still works
    assert "Healthy title" in run(["candidates", *common], cache).stdout


@zstd
def test_json_output_is_one_document_and_warnings_go_to_stderr(
    tmp_path: Path, damaged_root: tuple[Path, str]
) -> None:
    root, skipped = damaged_root
    common = ["--json", "--sessions", str(root), "--target", "none"]
    good, bad = prompt(tmp_path, GOOD), prompt(tmp_path, BAD)
    cache = tmp_path / "cache"

    listed = run(["candidates", *common], cache)
    assert listed.returncode == 0 and listed.stderr.splitlines() == [skipped]
    assert [row["sessionId"] for row in json.loads(listed.stdout)] == [GOOD]

    prepared = run(["prepare", good, *common], cache)
    assert prepared.returncode == 0 and prepared.stderr == ""  # it never looked at the bad log
    assert GOOD_TEXT in json.loads(prepared.stdout)["additionalContext"]["content"][0]["text"]

    checked = run(["check", bad, *common], cache)  # a failing check still answers with its report
    assert checked.returncode == 1 and checked.stderr.splitlines() == [skipped]
    assert json.loads(checked.stdout)["ok"] is False

    failed = run(["prepare", bad, *common], cache)
    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr.splitlines()[:-1] == [skipped]
    error = json.loads(failed.stderr.splitlines()[-1])["error"]
    assert error["code"] == "SESSION_REFERENCE_READ_FAILED" and "invalid frame magic" in error["message"]

    for args, code in (
        (["prepare", str(tmp_path / "missing.md"), *common], "IO_ERROR"),
        (["prepare", good, "--max-references", "9", *common], "SESSION_REFERENCE_INVALID_CONFIG"),
        (["uri", "decode", "not-a-uri", "--json"], "SESSION_REFERENCE_INVALID_REFERENCE"),
        (["candidates", "--json", "--sessions", good], ROOT_NOT_FOUND),  # a file, not a directory
    ):
        result = run(args, cache)
        assert (result.returncode, result.stdout) == (1, ""), args
        assert json.loads(result.stderr.splitlines()[-1])["error"]["code"] == code, result.stderr

    demo = run(["demo", "--json"], cache)  # the demo is a show for people: refused, not mixed in
    assert (demo.returncode, demo.stdout) == (EXIT_USAGE, "")
    assert "demo has no JSON output" in demo.stderr


@zstd
def test_a_message_that_is_not_utf8_is_read_as_the_editor_reads_it(
    tmp_path: Path, damaged_root: tuple[Path, str]
) -> None:
    """Undecodable bytes become U+FFFD (as in ``check`` and the editor), never a traceback."""
    root = damaged_root[0]
    message = b"\xff caf\xe9 " + format_session_reference_mention(GOOD).encode() + b"\n"
    path = tmp_path / "latin1.md"
    path.write_bytes(message)
    common = ["--json", "--sessions", str(root), "--target", "none"]
    for source, stdin in ((str(path), None), ("-", message)):
        parsed_text = run(["parse", source, "--json"], tmp_path / "cache", stdin)
        assert parsed_text.returncode == 0, parsed_text.stderr
        document = json.loads(parsed_text.stdout)
        assert document["text"].startswith("\ufffd caf\ufffd @")
        assert [reference["sessionId"] for reference in document["references"]] == [GOOD]
        prepared = run(["prepare", source, *common], tmp_path / "cache", stdin)
        assert prepared.returncode == 0, prepared.stderr
        document = json.loads(prepared.stdout)
        assert document["content"][0]["text"].startswith("\ufffd caf\ufffd ")
        assert GOOD_TEXT in document["additionalContext"]["content"][0]["text"]


def test_the_store_commands_do_not_import_the_lsp_stack() -> None:
    """``prepare`` and ``candidates`` start in a fraction of a second: lsprotocol alone takes ~0.6 s."""
    code = (
        "import sys\n"
        "from dsh_session_reference import cli\n"
        "from dsh_session_reference.store.index import store, tasks\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('lsprotocol', 'pygls')))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_a_plain_candidates_run_does_not_import_the_catalog(tmp_path: Path) -> None:
    """The catalog costs every fresh process about 20 ms of imports: only a run that asks for body
    search pays for it."""
    code = (
        "import sys\n"
        "from dsh_session_reference.main import main\n"
        f"main(['--sessions', {str(tmp_path)!r}, 'candidates', 'a'])\n"
        "wanted = ('dsh_session_reference.store.catalog',)\n"
        "print(sorted(name for name in sys.modules if name in wanted), file=sys.stderr)"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert run.stderr.strip().splitlines()[-1] == "[]", run.stderr
