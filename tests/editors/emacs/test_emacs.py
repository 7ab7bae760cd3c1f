"""Emacs 28 + eglot 1.9 (batch) drives the real server with real keys (drive.el).

The same editor path as the Neovim test, through eglot's own code: ``M-x eglot`` with
``initializationOptions`` from ``eglot-server-programs``, flymake showing the error on
a noncanonical URI, ``@`` + ``completion-at-point`` listing the sessions in
*Completions* in upstream's rank order (eglot sorts by ``sortText``), choosing one
there runs eglot's exit function, which applies the item's ``textEdit``;
``M-x eglot-code-actions`` with the preferred fix, and a preview command bound to a key.
Last, a query typed after ``@``: every row the server found, in its order (eglot's default
``flex`` style would drop and re-sort them; the documented configuration keeps the server's list
in prompt buffers). Then issue 19: the documented ``M-x dsh-open-transcript`` on a mention shows its
transcript read-only, ``workspace/symbol`` (``xref-find-apropos``) lists sessions, and inlay hints
are checked where eglot has them (``eglot-inlay-hints-mode``, Emacs 29+).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_session_reference.display import display_inline_text
from dsh_session_reference.resolver import SessionReferenceResolver
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.transcript import read_transcript
from dsh_session_reference.uri import (
    encode_session_reference_uri,
    parse_session_reference_text,
)
from editors.ranking import ranked_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import EditorRun, Scenario

pytestmark = pytest.mark.editor

DRIVER = Path(__file__).resolve().parent / "drive.el"
TYPED_QUERIES = ("mig", "文档")
"""Queries with rows whose titles do not start with the query, in an order ``flex`` would change."""
ELPA = Path("/usr/share/emacs/site-lisp/elpa")
SYMBOL_QUERY = "dry"


def _emacs() -> str:
    emacs = shutil.which("emacs")
    assert emacs is not None, "emacs is not installed: run scripts/install-system-deps"
    assert list(ELPA.glob("eglot-*")), (
        "eglot is not installed (Debian elpa-eglot): run scripts/install-system-deps"
    )
    version = subprocess.run([emacs, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("GNU Emacs"), version
    return emacs


def _elisp_string(text: str) -> str:
    return json.dumps(text)  # ASCII JSON string literals read as Emacs Lisp strings


def _transcript_text(scenario: Scenario, session_id: str) -> tuple[str | None, str]:
    """The title and text of the transcript the server must show, rendered by the library."""
    with tempfile.TemporaryDirectory() as index_dir:  # the server's store, with a throwaway index
        store = IndexedSessionStore(str(scenario.sessions_root), index_dir=index_dir)
        transcript = asyncio.run(read_transcript(SessionReferenceResolver(store), session_id))
    return transcript.title, transcript.text


def test_emacs_eglot_completion_diagnostic_quick_fix_and_preview(
    scenario: Scenario,
    subtests: pytest.Subtests,
    run_editor: Callable[[list[str], Scenario, dict[str, Any]], EditorRun],
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    config = documented_config(
        "eglot",
        {
            ':sessionsRoot ""': f":sessionsRoot {_elisp_string(str(scenario.sessions_root))}",
            ':targetSessionId ""': f":targetSessionId {_elisp_string(scenario.target_id)}",
        },
    )
    config_path = tmp_path / "init.el"
    config_path.write_text(config, encoding="utf-8")
    run = run_editor(
        [_emacs(), "-Q", "--batch", "-l", str(DRIVER)],
        scenario,
        {"config": str(config_path), "queries": list(TYPED_QUERIES), "symbol_query": SYMBOL_QUERY},
    )
    result = run.result
    assert result.get("error") is None, run.explain()
    assert run.returncode == 0, run.explain()
    bad_line_number = 3  # 1-based: "# Next step", "", the bad line

    # 1. flymake shows eglot's error on the noncanonical URI.
    errors = [d for d in result["open"]["diagnostics"] if d["type"] == "eglot-error"]
    assert len(errors) == 1, result["open"]
    (error,) = errors
    assert error["code"] == "noncanonical-uri"
    assert error["source"] == "dsh-session-reference"
    assert error["line"] == bad_line_number
    assert "[noncanonical-uri]" in error["text"] and scenario.fixed_label in error["text"]
    line_start = (
        scenario.prompt.read_text(encoding="utf-8").index(scenario.bad_line) + 1
    )  # Emacs points are 1-based
    uri_start = line_start + scenario.bad_line.index(scenario.bad_uri)
    assert error["beg"] <= uri_start < uri_start + len(scenario.bad_uri) <= error["end"], error

    # 2. `@` + completion-at-point: *Completions* lists every candidate in upstream's rank order.
    complete = result["complete"]
    shown = complete["shown"]
    assert shown == [display_inline_text(c.label).lstrip() for c in scenario.candidates]

    # 3. Choosing the pick-th entry applies the item's textEdit: the canonical mention replaces the `@`.
    picked = scenario.picked
    accepted = result["accept"]["line"]
    assert accepted.startswith(scenario.last_line + " @[")
    (reference,) = parse_session_reference_text(accepted[len(scenario.last_line) + 1 :]).references
    assert reference.session_id == picked.session_id
    assert reference.label == display_inline_text(picked.label)

    # 4. eglot-code-actions, RET on the default (the server's preferred fix): canonical URI, no error.
    fix = result["fix"]
    assert fix["line_before"] == scenario.bad_line
    canonical = encode_session_reference_uri(scenario.fixed_id)
    assert fix["line_after"] == scenario.bad_line.replace(scenario.bad_uri, canonical)
    assert [d for d in fix["diagnostics"] or [] if d["type"] == "eglot-error"] == []
    final_text = "\n".join(result["lines_at_end"])
    references = parse_session_reference_text(final_text).references
    assert [r.session_id for r in references] == [scenario.fixed_id, picked.session_id]

    # 5. The preview key: the prepared context and byte accounting in a read-only buffer.
    preview = result["preview"]
    assert preview["ok"] is True, preview
    text = preview["text"]
    assert result["preview_buffer"] == text.split("\n")
    assert "What the model reads of it:" in text and "Byte accounting" in text
    assert not scenario.missing_accounting(text, final_text)
    # eglot 1.9 has no window/showDocument either: the server adds a showMessage summary.
    (message,) = result["messages"]
    assert message["type"] == 3 and preview["summary"] in message["message"], message

    # 6. `@query` + completion-at-point: every row the server found, in dsh's order.
    typed = result["typed"]
    assert [entry["query"] for entry in typed] == list(TYPED_QUERIES)
    for entry in typed:
        query = entry["query"]
        assert entry["line"].endswith(f" @{query}"), entry
        ranked = asyncio.run(
            ranked_for(scenario.sessions_root, scenario.target_id, str(scenario.workspace), query)
        )
        assert len(ranked) >= 2 and ranked != sorted(ranked), (query, ranked)  # an order to lose
        assert entry["shown"] == ranked, (query, entry["shown"], ranked)

    # 7. M-x dsh-open-transcript on the accepted mention: the library's transcript, read-only.
    transcript = result["transcript"]
    title, text = _transcript_text(scenario, picked.session_id)
    assert title is not None and f"title:     {display_inline_text(title)}" in text.split("\n")
    assert transcript["name"] == f"*dsh transcript: {title}*"
    assert transcript["text"] == text
    assert transcript["read_only"] is True

    # 8. Sessions as workspace symbols: what xref-find-apropos lists.
    expected = asyncio.run(
        ranked_for(scenario.sessions_root, scenario.target_id, str(scenario.workspace), SYMBOL_QUERY)
    )
    assert expected and sorted(result["symbols"]) == sorted(expected), result["symbols"]
    assert "Traceback" not in result["server_log"]

    # 9. Inlay hints: one after each of the two mentions, where eglot shows them.
    with subtests.test("inlay hints"):
        if not result["inlay_supported"]:
            pytest.skip(
                "this eglot has no eglot-inlay-hints-mode (eglot 1.9 on Emacs 28; built in from Emacs 29)"
            )
        hints = result["hints"]
        assert len(hints) == 2 and all(" msg" in hint for hint in hints), hints
