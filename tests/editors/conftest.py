"""Shared harness for the real-editor tests (Neovim, Emacs): a sample store, a prompt, one headless run.

Each test writes a throwaway sessions root and a prompt file, runs a real editor in its
own process group with an isolated HOME/XDG, lets an in-editor driver type the user's
keys and record what the editor showed into a JSON file, and asserts on that file.
Everything expected is computed with the library the server itself uses, so the tests
check the editor-facing result against upstream's ranking and URI grammar, not against
copies of them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh.realdsh import SendScene, send_scene
from dsh_session_reference.display import display_inline_text
from dsh_session_reference.jsjson import js_stringify, js_utf8
from dsh_session_reference.report import render_accounting, render_prepared_report
from dsh_session_reference.resolver import Candidate, SessionReferenceResolver, agent_for_target
from dsh_session_reference.sample import write_sample_store
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.tokens import COUNTER, TokenCounter
from dsh_session_reference.uri import (
    SESSION_REFERENCE_SCHEME,
    parse_prompt_text,
    scan_session_references,
)
from editors.environment import isolated_env
from editors.mentions import STALE_LABEL
from editors.ranking import ranking_sessions

REPO = Path(__file__).resolve().parents[2]

DRIVER_TIMEOUT_MS = 15_000
"""The driver's own limit; it writes a result naming the step it was waiting for."""
PROCESS_TIMEOUT_S = 25
"""pytest's limit on top: the whole process group is killed if the driver's limit failed too."""


def noncanonical_uri(session_id: str) -> str:
    """A ``dsh-session:`` URI that decodes to ``session_id`` but is not canonical.

    The JSON string escapes its first character as ``\\uXXXX``: ``JSON.parse`` reads the
    same id, but re-encoding gives a different payload, so the strict parser rejects it
    and the id is recoverable (the quick fix's case).
    """
    escaped = f'"\\u{ord(session_id[0]):04x}' + js_stringify(session_id[1:])[1:]
    payload = base64.urlsafe_b64encode(js_utf8(escaped)).rstrip(b"=").decode("ascii")
    uri = SESSION_REFERENCE_SCHEME + payload
    (span,) = scan_session_references(uri)
    assert span.problem == "noncanonical" and span.recovered_id == session_id, span
    return uri


@dataclass(frozen=True)
class Scenario:
    """One prompt over one sample store, and what a correct editor session must show."""

    workspace: Path
    sessions_root: Path
    prompt: Path
    target_id: str
    candidates: list[Candidate]
    """``list_candidates`` for the target, in upstream's rank order."""
    fixed_id: str
    """The session the noncanonical mention names."""
    bad_uri: str
    bad_line: str
    pick: int
    """Which completion item the driver accepts (1-based)."""
    server_bin: Path
    """Where the installed ``dsh-session-reference`` lives; put first on the editor's ``PATH``."""
    last_line: str

    @property
    def picked(self) -> Candidate:
        return self.candidates[self.pick - 1]

    @property
    def fixed_label(self) -> str:
        """The fixed session as diagnostics and quick fixes name it: its title, as a row shows it."""
        return display_inline_text(self.candidates[0].label)

    def prepared_accounting(self, document_text: str, *, exact_tokens: bool = True) -> list[str]:
        """The accounting the preview must show for ``document_text``: dsh's own parse + prepare,
        each session's table and the totals, one line each. ``exact_tokens=False``: as a server
        without the ``tokens`` extra counts (the VS Code package does not carry it)."""
        counter = COUNTER if exact_tokens else TokenCounter(find=False)
        # Exact counts are what the editor's server (with the extra) shows; the tokenizer loads in
        # the background, and a count asked before then is the estimate.
        assert not exact_tokens or COUNTER.wait(120), (
            "the tokens extra is not installed in the test environment"
        )
        store = JsonlSessionStore(str(self.sessions_root))

        async def prepare() -> list[str]:
            agent = await agent_for_target(store, self.target_id, str(self.workspace))
            resolver = SessionReferenceResolver(store)
            parsed = parse_prompt_text(document_text)
            prepared = await resolver.prepare(
                agent, [{"type": "text", "text": parsed.text}], parsed.references
            )
            return render_accounting(prepared, resolver.config, parsed.text, counter)

        return asyncio.run(prepare())

    def model_text(self, document_text: str) -> str:
        """What ``dsh-session-reference prepare`` prints for ``document_text`` (the model-facing
        text), its tokens estimated as a server without the ``tokens`` extra counts them."""
        store = JsonlSessionStore(str(self.sessions_root))

        async def prepare() -> str:
            agent = await agent_for_target(store, self.target_id, str(self.workspace))
            resolver = SessionReferenceResolver(store)
            parsed = parse_prompt_text(document_text)
            prepared = await resolver.prepare(
                agent, [{"type": "text", "text": parsed.text}], parsed.references
            )
            return render_prepared_report(
                parsed.text, prepared, resolver.config, counter=TokenCounter(find=False)
            )

        return asyncio.run(prepare())

    def missing_accounting(self, shown: str, document_text: str, *, exact_tokens: bool = True) -> list[str]:
        """The lines of the accounting of ``document_text`` that a preview's text lacks (none, when
        the preview shows it all), with the preview's text after them to compare."""
        lines = set(shown.splitlines())
        missing = [
            line
            for line in self.prepared_accounting(document_text, exact_tokens=exact_tokens)
            if line not in lines
        ]
        return [*missing, "--- shown ---", shown] if missing else []


@pytest.fixture(scope="session")
def installed_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where ``dsh-session-reference`` is installed as a user gets it: the wheel built from this
    tree, installed the way ``pipx install`` does (an environment of its own, dependencies
    resolved from the package index). The editors find the command on ``PATH``, exactly as the
    documented configurations name it, not a path into the clone. With the ``tokens`` extra, as
    the README offers it: the editors' previews then count tokens as the tests' own report does."""
    base = tmp_path_factory.mktemp("installed")
    # setuptools builds in the tree's own build/: workers (and runs) that build at once would
    # copy over each other's files, so they take turns on a lock beside their temporary folders.
    with (tmp_path_factory.getbasetemp().parent / "wheel-build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(REPO)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("dsh_session_reference-*.whl")
    environment = base / "env"
    subprocess.run([sys.executable, "-m", "venv", str(environment)], check=True, timeout=300)
    installed = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheel}[tokens]"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    command = environment / "bin" / "dsh-session-reference"
    version = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert version.stdout.startswith("dsh-session-reference "), version.stdout
    return command.parent


@pytest.fixture
def scenario(tmp_path: Path, installed_bin: Path) -> Scenario:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sessions_root = tmp_path / "sessions"
    write_sample_store(str(sessions_root))
    store = JsonlSessionStore(str(sessions_root))
    records = store.list_sessions()
    # Write for a session with a cwd, so self-exclusion and cwd ranking both show in the list.
    target = next(record for record in records if record.cwd is not None)
    assert target.cwd is not None
    ranking_sessions(sessions_root, target.cwd)

    async def ranked() -> list[Candidate]:
        agent = await agent_for_target(store, target.id, str(workspace))
        return await SessionReferenceResolver(store).list_candidates(agent)

    candidates = asyncio.run(ranked())
    assert len(candidates) >= 3, "the sample store needs a few sessions besides the target"
    fixed = candidates[0]
    bad_uri = noncanonical_uri(fixed.session_id)
    bad_line = f"Compare with @[{STALE_LABEL}]({bad_uri}) before you start."
    prompt = workspace / "prompt.md"
    last_line = "Also ask about"
    prompt.write_text(f"# Next step\n\n{bad_line}\n{last_line}\n", encoding="utf-8")
    return Scenario(
        workspace=workspace,
        sessions_root=sessions_root,
        prompt=prompt,
        target_id=target.id,
        candidates=candidates,
        fixed_id=fixed.session_id,
        bad_uri=bad_uri,
        bad_line=bad_line,
        pick=2,
        server_bin=installed_bin,
        last_line=last_line,
    )


DOCS = REPO / "docs" / "editors.md"


@pytest.fixture
def documented_config() -> Callable[[str, dict[str, str]], str]:
    """The configuration block docs/editors.md marks ``<!-- editors-test: NAME -->``, with placeholders filled.

    The tests run the documented setup itself, so a snippet that stops working fails here.
    Each key of ``fill`` (the snippet's own default, such as ``sessionsRoot = ""``) must occur
    exactly once and is replaced by its value (the test's server command, store, target).
    """
    docs = DOCS.read_text(encoding="utf-8")

    def block(name: str, fill: dict[str, str]) -> str:
        marker = f"<!-- editors-test: {name} -->\n```"
        assert docs.count(marker) == 1, f"docs/editors.md has no single {marker!r} block"
        start = docs.index("\n", docs.index(marker) + len(marker)) + 1
        text = docs[start : docs.index("\n```\n", start) + 1]
        for old, new in fill.items():
            assert text.count(old) == 1, (
                f"expected exactly one {old!r} in the {name} block of docs/editors.md"
            )
            text = text.replace(old, new)
        return text

    return block


@dataclass(frozen=True)
class EditorRun:
    result: dict[str, Any]
    returncode: int
    output: str

    def explain(self) -> str:
        """What to print when an assertion fails: the driver's verdict, the editor's output, the server's log."""
        log = self.result.get("server_log", "")
        log_path = Path(self.result.get("lsp_log", "/nonexistent"))
        if log_path.exists():
            log = log_path.read_text(errors="replace")
        return (
            f"editor exit {self.returncode}; driver error: {self.result.get('error')!r}; "
            f"last step: {self.result.get('last_step')!r}\n--- editor output ---\n{self.output[-4000:]}"
            f"\n--- language server log ---\n{log[-8000:]}"
        )


@pytest.fixture
def run_editor(tmp_path: Path) -> Callable[[list[str], Scenario, dict[str, Any]], EditorRun]:
    """Run ``argv`` headless with a driver spec, then reap whatever is left of its process group."""

    def run(argv: list[str], scenario: Scenario, extra: dict[str, Any]) -> EditorRun:
        home = tmp_path / "home"
        result_path = tmp_path / "result.json"
        spec_path = tmp_path / "spec.json"
        spec = {
            "file": str(scenario.prompt),
            "result": str(result_path),
            "pick": scenario.pick,
            "timeout_ms": DRIVER_TIMEOUT_MS,
            **extra,
        }
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        path = os.pathsep.join([str(scenario.server_bin), os.environ.get("PATH", "")])
        env = isolated_env(home, path, drop=("NVIM",), TERM="dumb")
        env["DSH_EDITOR_SPEC"] = str(spec_path)
        process = subprocess.Popen(
            argv,
            cwd=scenario.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=PROCESS_TIMEOUT_S)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            timed_out = True
        finally:
            # The group outlives the editor only if a child did. A language server is not one of
            # them: it leads a process session of its own (or the editor started it so), and ends
            # when the editor's pipe to it closes.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        text = output.decode(errors="replace")
        if timed_out:
            pytest.fail(f"{argv[0]} did not finish in {PROCESS_TIMEOUT_S} s:\n{text}")
        if not result_path.exists():
            pytest.fail(f"{argv[0]} exited {process.returncode} without a result file:\n{text}")
        result = json.loads(result_path.read_text(encoding="utf-8"))
        return EditorRun(result, process.returncode, text)

    return run


@dataclass
class EditorSend:
    """What an editor's send to the real dsh gave: the editor's run, the request dsh then sent the
    scripted model, the sessions the send created, the dsh web address it went to and the
    workspace folder it was sent from."""

    run: EditorRun
    request: dict[str, Any]
    created: list[dict[str, Any]]
    url: str
    workspace: Path


SendFromEditor = Callable[[str, Callable[[SendScene], str], Callable[[Path, Path], list[str]]], EditorSend]


@pytest.fixture
def send_from_editor(
    scenario: Scenario,
    run_editor: Callable[[list[str], Scenario, dict[str, Any]], EditorRun],
    tmp_path: Path,
) -> SendFromEditor:
    """The real-dsh send scene every editor's send test plays: ``send(config_name, config, argv)``
    writes the editor's configuration (``config(scene)``, the documented blocks pointed at the
    scene's root and host) to ``tmp_path / config_name``, runs ``argv(config_path, prompt)`` over
    the scene's prompt, and waits for the request dsh sends the model."""

    def send(
        config_name: str, config: Callable[[SendScene], str], argv: Callable[[Path, Path], list[str]]
    ) -> EditorSend:
        workspace = scenario.workspace
        with send_scene(workspace, tmp_path / "dsh-home", long=2000) as dsh:
            prompt = dsh.write_prompt(workspace)
            config_path = tmp_path / config_name
            config_path.write_text(config(dsh), encoding="utf-8")
            mark = dsh.model.mark()
            run = run_editor(
                argv(config_path, prompt),
                dataclasses.replace(scenario, prompt=prompt),
                {"config": str(config_path)},
            )
            assert run.result.get("error") is None, run.explain()
            request = dsh.model.wait_for(mark, kind="text", timeout=30)
            return EditorSend(run, request, dsh.created(), dsh.web.url, workspace)

    return send
