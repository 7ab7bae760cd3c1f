"""The feature functions on their own: settings, labels, completion, analysis, fixes, hover, preview."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from lsp_support import NOW_MS, TARGET_ID, Spec, append_title, write_store
from lsprotocol import types

from dsh_session_reference import analysis as codes
from dsh_session_reference.analysis import MAX_FINDINGS, Analysis, analyze
from dsh_session_reference.assembly import open_live
from dsh_session_reference.cancellation import AbortSignal
from dsh_session_reference.check import check_files
from dsh_session_reference.display import (
    display_block_text,
    display_inline_text,
    gutter,
    readable_time,
    relative_time,
    short_age,
)
from dsh_session_reference.lsp import actions as actions_module
from dsh_session_reference.lsp.actions import PREVIEW_COMMAND, PREVIEW_KIND, code_actions, fixes_for
from dsh_session_reference.lsp.completion import (
    DESCRIPTION_GAP,
    DESCRIPTION_SCALE,
    ROW_COLUMNS,
    columns,
    completion_items,
    find_trigger,
    item_data,
    project_name,
)
from dsh_session_reference.lsp.contract import Analysed
from dsh_session_reference.lsp.diagnostics import SOURCE, check_text, to_diagnostics
from dsh_session_reference.lsp.documents import Document
from dsh_session_reference.lsp.features import inline as inline_feature
from dsh_session_reference.lsp.features.inline import InlineCosts
from dsh_session_reference.lsp.hover import hover_text, read_session_facts, session_summary
from dsh_session_reference.lsp.positions import LineIndex
from dsh_session_reference.lsp.preview import (
    KeptPreviews,
    Preview,
    build_model_text,
    build_preview,
    document_of_preview,
    document_summary,
    is_model_text,
    preview_uri,
)
from dsh_session_reference.lsp.sessions import candidate_row
from dsh_session_reference.lsp.settings import Settings, apply_settings
from dsh_session_reference.model import SessionRecord
from dsh_session_reference.report import render_prepared_report
from dsh_session_reference.resolver import AgentRef, Candidate, SessionReferenceResolver
from dsh_session_reference.snapshot import build_additional_context
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.tokens import COUNTER, TokenCounter
from dsh_session_reference.uri import (
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)


def mention(session_id: str, label: str | None = None) -> str:
    return format_session_reference_mention(session_id, label)


def noncanonical_uri(session_id: str) -> str:
    """A URI whose payload decodes to ``session_id`` through a JSON escape (not canonical)."""
    escaped = json.dumps(session_id, ensure_ascii=True).replace("-", "\\u002d")
    return "dsh-session:" + base64.urlsafe_b64encode(escaped.encode()).rstrip(b"=").decode()


@pytest.fixture
def resolver(store_root: Path) -> SessionReferenceResolver:
    return SessionReferenceResolver(JsonlSessionStore(store_root))


@pytest.fixture
def agent(workspace: Path) -> AgentRef:
    return AgentRef(TARGET_ID, str(workspace))


# --- settings -------------------------------------------------------------------------------


def test_settings_accept_the_section_or_a_wrapper_and_reset_on_null() -> None:
    settings, warnings = apply_settings(Settings(), {"dshSessionReference": {"maxReferences": 2}})
    assert settings.max_references == 2 and warnings == []
    settings, warnings = apply_settings(settings, {"candidateLimit": 7, "sessionsRoot": "/s"})
    assert (settings.candidate_limit, settings.sessions_root, settings.max_references) == (7, "/s", 2)
    settings, _ = apply_settings(settings, {"dshSessionReference": {"maxReferences": None}})
    assert settings.max_references is None  # not set: dsh's profile or default decides
    assert apply_settings(settings, None) == (settings, [])
    assert apply_settings(settings, {"unrelated": 1}) == (settings, [])


def test_invalid_settings_keep_the_old_value_with_upstreams_message() -> None:
    settings, warnings = apply_settings(
        Settings(), {"maxReferences": 0, "maxReferenceBytes": 1.5, "targetSessionId": 3, "bodySearch": 1}
    )
    assert settings == Settings()
    assert warnings == [
        "dshSessionReference.targetSessionId must be a string; keeping ''",
        "dshSessionReference.bodySearch must be true or false; keeping False",
        "dshSessionReference.maxReferences: session-reference: maxReferences must be a positive safe "
        "integer; keeping dsh's profile or default",
        "dshSessionReference.maxReferenceBytes: session-reference: maxReferenceBytes must be a positive "
        "safe integer; keeping dsh's profile or default",
    ]


def test_a_profile_setting_is_one_folder_name() -> None:
    settings, warnings = apply_settings(Settings(), {"profile": "../../etc"})
    assert settings.profile == "" and warnings == [
        "dshSessionReference.profile: dsh: invalid profile name '../../etc'; keeping ''"
    ]
    assert apply_settings(Settings(), {"profile": "review"}) == (Settings(profile="review"), [])


def test_budgets_above_the_bound_are_clamped_with_upstreams_message_where_it_has_one() -> None:
    settings, warnings = apply_settings(Settings(), {"maxReferences": 4, "candidateLimit": 1e308})
    assert (settings.max_references, settings.candidate_limit) == (3, 1_000)
    assert warnings == [
        "dshSessionReference.maxReferences: session-reference: maxReferences must not exceed 3; using 3",
        "dshSessionReference.candidateLimit: candidateLimit 1e+308 is above this server's bound of 1,000; "
        "using 1,000",
    ]


# --- labels ---------------------------------------------------------------------------------


def test_a_row_says_its_age_in_a_few_characters() -> None:
    """VS Code's popup cut "4 months ago · terraform" to "4 months a…": the age is short, the
    project still fits."""
    now = 10**12
    ages = {0: "now", 59: "now", 60: "1 min", 3_600: "1 h", 86_400 * 3: "3 d", 86_400 * 14: "2 wk"}
    ages |= {86_400 * 125: "4 mo", 86_400 * 800: "2 y", -5: "future"}
    assert {seconds: short_age(now - seconds * 1000, now) for seconds in ages} == ages


def test_display_inline_text_matches_upstreams_tui() -> None:
    assert display_inline_text("a\nb\tc\x1b[1m\x7f\x9f\u00a0") == "a\\x0ab\\x09c\\x1b[1m\\x7f\\x9f\u00a0"
    assert display_inline_text("plain") == "plain"


def test_times() -> None:
    assert readable_time(0) == "1970-01-01 00:00 UTC"
    assert display_block_text("one\r\ntwo\tthree\x1b[2J\rfour") == "one\ntwo\tthree\\x1b[2J\\x0dfour"
    assert relative_time(NOW_MS - 90_000, NOW_MS) == "1 minute ago"
    assert relative_time(NOW_MS - 3 * 3600_000, NOW_MS) == "3 hours ago"
    assert relative_time(NOW_MS, NOW_MS) == "just now"
    assert relative_time(NOW_MS + 5000, NOW_MS) == "in the future"


# --- completion -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@", (0, "")),
        ("see @ab", (4, "ab")),
        ("line\n@x", (5, "x")),
        ("tab\t@q", (4, "q")),
        ("nbsp\u00a0@q", (5, "q")),
        ("mail@example", None),
        ('@"quoted', None),
        ("@[label](dsh-session:x)", None),
        ("no token", None),
        ("@" + "a" * 600, None),
    ],
)
def test_find_trigger_is_upstream_tuis_active_token(text: str, expected: tuple[int, str] | None) -> None:
    trigger = find_trigger(text, len(text))
    assert (None if trigger is None else (trigger.at, trigger.query)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see @zstd log", (4, "zstd log")),
        ("@a b c d e f", (0, "a b c d e f")),
        ("line one\n@x y", (9, "x y")),
        ("@a b c d e f g", None),  # more words than a query holds
        ("a @[x](dsh-session:Ij) then prose", None),
        ("mail@example.com and more", None),
        ("see @", (4, "")),  # the one-token rule still answers
    ],
)
def test_a_query_spans_words_only_while_the_popup_is_open(
    text: str, expected: tuple[int, str] | None
) -> None:
    continuing = find_trigger(text, len(text), continuing=True)
    assert (None if continuing is None else (continuing.at, continuing.query)) == expected
    fresh = find_trigger(text, len(text))  # a fresh request: one token, so prose never opens a popup
    assert fresh is None or " " not in fresh.query


def test_completion_items_keep_rank_and_edit_from_the_at() -> None:
    candidates = [
        Candidate("s-1", "Title one", "/w", NOW_MS - 60_000),
        Candidate("s-2", "s-2", None, NOW_MS),
        Candidate("s-3", "bad\nlabel]", "/o", NOW_MS),
    ]
    edit_range = types.Range(start=types.Position(0, 4), end=types.Position(0, 6))
    items = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=True)
    assert [item.sort_text for item in items] == ["0000", "0001", "0002"]
    assert [item.label for item in items] == ["Title one", "s-2", "bad\\x0alabel]"]
    assert all(item.filter_text and item.filter_text.startswith("@") for item in items)
    plain = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=True, filter_text=False)
    assert all(item.filter_text is None for item in plain)
    assert all(
        isinstance(item.text_edit, types.TextEdit) and item.text_edit.range == edit_range for item in items
    )
    assert items[2].text_edit.new_text == mention("s-3", "bad\\x0alabel]")  # type: ignore[union-attr]
    # What tells sessions apart first (age, then the project folder), the id last.
    assert items[0].detail is None and items[1].detail is None  # the id is in the documentation
    assert items[0].label_details == types.CompletionItemLabelDetails(description="1 min · w")
    assert items[1].label_details == types.CompletionItemLabelDetails(description="now")
    assert item_data(items[0]) == ("s-1", "Title one")
    plain = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=False)
    assert plain[0].label_details is None and plain[0].detail == "1 min · w · s-1"
    assert plain[1].detail == "now"
    assert candidate_row(candidates[1]) == {
        "sessionId": "s-2",
        "label": "s-2",
        "cwd": None,
        "createdAt": NOW_MS,
        "mention": mention("s-2", "s-2"),
        "project": None,
        "transcript": "dsh-transcript:/s-2.txt?s-2",
    }


def test_every_filter_text_starts_with_what_was_typed() -> None:
    """VS Code scores what was typed against each filter text before it reads sort_text: rows whose
    filter texts all start with exactly what was typed score the same, so the server's rank holds."""
    candidates = [
        Candidate("s-1", "zeta mig", "/w/app", NOW_MS),
        Candidate("s-2", "Migration plan", None, NOW_MS),
        Candidate("s-3", "文档 迁移", "/w/文档", NOW_MS),
    ]
    edit_range = types.Range(start=types.Position(0, 0), end=types.Position(0, 4))
    for typed in ("@", "@mig", "@Mig", "@文档", "@zstd log"):
        items = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=True, typed=typed)
        assert all(
            item.filter_text is not None and item.filter_text.startswith(typed + " ") for item in items
        )
        assert [item.sort_text for item in items] == ["0000", "0001", "0002"]


def test_project_name_is_the_last_folder() -> None:
    assert [project_name(cwd) for cwd in ("/home/dev/shop", "/home/dev/shop/", "/", "C:\\work\\app")] == [
        "shop",
        "shop",
        "/",
        "app",
    ]


def test_completion_rows_escape_controls_in_cwds_and_ids() -> None:
    """A cwd or id is anyone's text: a newline or a terminal escape must not reach the row."""
    cwd = "/work/evil\n\x1b[31mred\x07"
    candidates = [Candidate("s\x1b-1", "Title", cwd, NOW_MS), Candidate("s-2", "s-2", cwd, NOW_MS)]
    edit_range = types.Range(start=types.Position(0, 0), end=types.Position(0, 1))
    shown_cwd = "/work/evil\\x0a\\x1b[31mred\\x07"
    for label_details in (True, False):
        items = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=label_details)
        for item in items:
            visible = [item.detail or "", item.filter_text or ""]
            if item.label_details is not None:
                visible.append(item.label_details.description or "")
            for text in visible:
                assert not re.search("[\x00-\x1f\x7f-\x9f]", text), (label_details, text)
            assert item.filter_text is not None and shown_cwd in item.filter_text
        where = items[0].label_details.description if label_details else items[0].detail  # type: ignore[union-attr]
        assert where is not None and "evil\\x0a\\x1b[31mred\\x07" in where
        assert label_details or "s\\x1b-1" in (items[0].detail or "")
    # What a pick inserts and what resolve reads still name the real session.
    assert item_data(items[0]) == ("s\x1b-1", "Title")


# --- analysis and diagnostics ---------------------------------------------------------------


async def test_a_clean_document_has_no_findings(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    text = f"Compare {mention('s-alpha', 'Refactor the parser')} with dsh-session:InMtZGVsdGEi."
    result = await analyze(text, resolver, agent)
    assert result.findings == []
    assert [r.session_id for r in result.references] == ["s-alpha", "s-delta"]
    assert all(r.retained is not None for r in result.references)


async def test_a_store_that_finds_records_alone_is_not_listed(store_root: Path, agent: AgentRef) -> None:
    """``check`` of three mentions must not list a root of 50,000 sessions (the CLI's store)."""
    listings = []

    class Counting(JsonlSessionStore):
        def list_sessions(self, stop: AbortSignal | None = None) -> list[SessionRecord]:
            listings.append(stop)
            return super().list_sessions(stop)

    text = f"{mention('s-alpha', 'stale')} {mention('s-missing')} {mention('s-delta')}"
    alone = await analyze(text, SessionReferenceResolver(Counting(store_root)), agent)
    listed = await analyze(text, SessionReferenceResolver(open_live(str(store_root))), agent)
    assert listings == []
    assert alone.findings == listed.findings
    assert {f.code for f in alone.findings} == {codes.STALE_LABEL, codes.UNKNOWN_SESSION}


async def test_every_problem_is_found_where_it_is(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    bad = noncanonical_uri("s-alpha")
    text = "\n".join(
        [
            f"1 @[old label]({bad})",
            f"2 {mention(TARGET_ID)}",
            f"3 {mention('s-missing')}",
            f"4 {mention('s-alpha', 'stale')}",
            f"5 {mention('s-alpha', 'Refactor the parser')}",
            "6 @[x](dsh-session:MTIz)",
        ]
    )
    result = await analyze(text, resolver, agent)
    found = {(f.code, f.severity, text.count("\n", 0, f.start) + 1) for f in result.findings}
    assert found == {
        (codes.NONCANONICAL_URI, "error", 1),
        (codes.SELF_REFERENCE, "error", 2),
        (codes.UNKNOWN_SESSION, "error", 3),
        (codes.STALE_LABEL, "warning", 4),
        (codes.DUPLICATE_REFERENCE, "hint", 5),
        (codes.MALFORMED_URI, "error", 6),
    }
    noncanonical = next(f for f in result.findings if f.code == codes.NONCANONICAL_URI)
    assert text[noncanonical.start : noncanonical.end] == bad
    missing = next(f for f in result.findings if f.code == codes.UNKNOWN_SESSION)
    assert text[missing.start : missing.end] == mention("s-missing")
    assert 'session "s-missing" not found' in missing.message


async def test_extra_sessions_and_budget(store_root: Path, agent: AgentRef) -> None:
    resolver = SessionReferenceResolver(
        JsonlSessionStore(store_root), max_references=2, max_reference_bytes=300
    )
    text = " ".join(mention(i) for i in ["s-alpha", "s-gamma", "s-delta", "s-alpha"])
    result = await analyze(text, resolver, agent)
    by_code = {(f.code, f.session_id) for f in result.findings if f.severity == "error"}
    assert (codes.TOO_MANY_REFERENCES, "s-delta") in by_code
    assert (codes.TOO_MANY_REFERENCES, "s-alpha") not in by_code
    tiny = SessionReferenceResolver(JsonlSessionStore(store_root), max_reference_bytes=60)
    result = await analyze(mention("s-gamma"), tiny, agent)
    assert [f.code for f in result.findings] == [codes.BUDGET_EXCEEDED_CODE]


async def test_findings_are_capped_but_errors_still_counted(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    text = "dsh-session:IiJ " * (MAX_FINDINGS + 10)
    result = await analyze(text, resolver, agent)
    assert len(result.findings) == MAX_FINDINGS + 1
    assert result.findings[-1].code == codes.MORE_PROBLEMS and result.findings[-1].severity == "error"
    assert result.has_errors


async def test_mentions_beyond_the_kept_ones_are_summarised_but_still_judged(
    resolver: SessionReferenceResolver, agent: AgentRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codes, "MAX_KEPT_SPANS", 4)
    alpha = mention("s-alpha", "Refactor the parser")
    kept = f"{alpha} " * 4
    clean = await analyze(kept + mention("s-delta", "Deploy checklist"), resolver, agent)
    assert not clean.has_errors
    assert clean.findings[-1].code == codes.MORE_PROBLEMS and clean.findings[-1].severity == "information"
    # Four distinct sessions, the fourth only among the mentions not kept: still an error, placed there.
    tail = " ".join(mention(i) for i in ("s-beta", "s-gamma", "s-delta"))
    crowded = await analyze(kept + tail, resolver, agent)
    too_many = [f for f in crowded.findings if f.code == codes.TOO_MANY_REFERENCES]
    assert [(f.session_id, f.start) for f in too_many] == [("s-delta", len(kept))]
    broken = await analyze(kept + "dsh-session:MTIz", resolver, agent)
    assert broken.findings[-1].code == codes.MORE_PROBLEMS and broken.findings[-1].severity == "error"
    assert broken.has_errors


async def test_check_text_gives_lsp_diagnostics(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    diagnostics = await check_text("😀 dsh-session:MTIz", resolver, agent)
    assert len(diagnostics) == 1
    diagnostic = diagnostics[0]
    assert diagnostic.source == SOURCE and diagnostic.code == codes.MALFORMED_URI
    assert diagnostic.range.start == types.Position(0, 3)  # the emoji is two UTF-16 units


async def test_check_files_reports_and_exits(
    tmp_path: Path, resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    good = tmp_path / "good.md"
    good.write_text(f"see {mention('s-alpha', 'Refactor the parser')}\n")
    bad = tmp_path / "bad.md"
    bad.write_text(f"é\n  {mention('s-missing')}\n")
    out = io.StringIO()
    assert await check_files([str(good)], resolver, agent, out=out) == 0
    assert "0 error(s)" in out.getvalue()
    out = io.StringIO()
    assert await check_files([str(good), str(bad), str(tmp_path / "nope.md")], resolver, agent, out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"{bad}:2:3: error: no session") and lines[0].endswith("[unknown-session]")
    assert lines[1].startswith(f"{tmp_path / 'nope.md'}: error: cannot read")
    out = io.StringIO()
    assert await check_files([str(bad)], resolver, agent, as_json=True, out=out) == 1
    report = json.loads(out.getvalue())
    assert report["ok"] is False
    [entry] = report["files"]
    assert entry["errors"] == 1
    assert entry["diagnostics"][0] | {"message": ""} == {
        "line": 2,
        "column": 3,
        "endLine": 2,
        "endColumn": 3 + len(mention("s-missing")),
        "severity": "error",
        "code": "unknown-session",
        "message": "",
        "sessionId": "s-missing",
    }


# --- fixes and code actions ------------------------------------------------------------------


async def test_fixes_rewrite_to_text_the_parser_accepts(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    text = f"a @[x]({noncanonical_uri('s-alpha')}) b dsh-session:InMtZGVsdGEi c {mention('s-alpha', 'old')}"
    result = await analyze(text, resolver, agent)
    titles = [fix.title for fix in fixes_for(result, 0, len(text))]
    assert titles == [
        'Use session "Refactor the parser"',
        "Remove this mention",
        "Turn into a labelled mention @[Deploy checklist]",
        "Remove this mention",
        'Refresh the label to the current title "Refactor the parser"',
        "Remove this mention",
    ]
    fixes = fixes_for(result, 0, len(text))
    for fix in fixes:
        fixed = text[: fix.start] + fix.new_text + text[fix.end :]
        assert (await analyze(fixed, resolver, agent)).error_count <= result.error_count
    canonical = fixes[0]
    fixed = text[: canonical.start] + canonical.new_text + text[canonical.end :]
    assert fixed.startswith("a @[x](dsh-session:InMtYWxwaGEi) b")


async def test_glued_bare_uri_fix_keeps_the_word(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    text = f"{encode_session_reference_uri('s-alpha')}y"
    result = await analyze(text, resolver, agent)
    [fix, _remove] = fixes_for(result, 0, 0)
    assert (
        text[: fix.start] + fix.new_text + text[fix.end :] == f"{mention('s-alpha', 'Refactor the parser')} y"
    )


async def test_a_pasted_raw_id_of_a_session_gets_use_session(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    for text, fixed in (
        ("see dsh-session:s-alpha now", f"see {mention('s-alpha', 'Refactor the parser')} now"),
        ("see @[x](dsh-session:s-alpha) now", f"see {mention('s-alpha', 'x')} now"),
    ):
        result = await analyze(text, resolver, agent)
        [finding] = [f for f in result.findings if f.severity == "error"]
        assert finding.message.startswith('this is the id of session "Refactor the parser", not its URI')
        [use, remove] = fixes_for(result, 5, 5)
        assert (use.title, use.preferred, remove.title) == (
            'Use session "Refactor the parser"',
            True,
            "Remove this mention",
        )
        assert text[: use.start] + use.new_text + text[use.end :] == fixed
        assert (await analyze(fixed, resolver, agent)).error_count == 0


async def test_a_uri_of_a_session_the_store_lacks_says_so_plainly(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    """A noncanonical URI of an id no session has names the id once and says it is not in the store."""
    result = await analyze("see @[x](dsh-session:Imdob3N0Ih)", resolver, agent)
    [finding] = result.findings
    assert finding.message == (
        'invalid session URI: it is not in canonical form, and no session in the store has the id "ghost"'
    )
    assert result.missing == frozenset({"ghost"})


async def test_no_fix_rewrites_to_a_session_that_does_not_exist(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    """``dsh-session:IiJ`` decodes to the id "" (canonically ``IiI``), which no session has: a
    rewrite would be an error at once, so only picking a session or removing the mention is offered."""
    text = "@[x](dsh-session:IiJ) and dsh-session:no-such-id"
    result = await analyze(text, resolver, agent)
    messages = [f.message for f in result.findings]
    # Plain words: no "the URI names session "" but ..." for an id that is empty.
    assert messages[0] == "invalid session URI: it decodes to an empty session id, which no session has"
    assert messages[1].startswith("invalid session URI: ")
    titles = [(fix.title, fix.preferred, fix.new_text) for fix in fixes_for(result, 0, len(text))]
    assert titles == [
        ("Pick a session for this mention…", False, "@x"),
        ("Remove this mention", False, ""),
        ("Pick a session for this mention…", False, "@"),
        ("Remove this mention", False, ""),
    ]
    index = LineIndex(result.text)
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri="file:///p.md"),
        range=types.Range(start=types.Position(0, 2), end=types.Position(0, 2)),
        context=types.CodeActionContext(diagnostics=[]),
    )

    def actions(command: str | None) -> list[types.CodeAction]:
        return quick_fixes(result, index, params, command)

    # Picking needs the client to open completion after the edit: offered only where it can.
    assert [a.title for a in actions(None)] == ["Remove this mention"]
    [pick, _remove] = actions("editor.action.triggerSuggest")
    assert pick.title == "Pick a session for this mention…" and not pick.is_preferred
    assert pick.command is not None and pick.command.command == "editor.action.triggerSuggest"


async def test_code_actions_respect_client_support(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    text = f"x {noncanonical_uri('s-alpha')}"
    result = await analyze(text, resolver, agent)
    index = LineIndex(result.text)
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri="file:///p.md"),
        range=types.Range(start=types.Position(0, 3), end=types.Position(0, 3)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    actions = code_actions(
        result, index, "utf-16", params, version=4, literal_support=True, document_changes=True
    )
    kinds = [action.kind for action in actions if isinstance(action, types.CodeAction)]
    assert kinds == [types.CodeActionKind.QuickFix, types.CodeActionKind.QuickFix, PREVIEW_KIND]
    first = actions[0]
    assert isinstance(first, types.CodeAction) and first.edit is not None and first.edit.document_changes
    assert first.edit.document_changes[0].text_document.version == 4  # type: ignore[union-attr]
    no_literals = code_actions(
        result, index, "utf-16", params, version=4, literal_support=False, document_changes=False
    )
    assert [(a.command, a.arguments) for a in no_literals] == [(PREVIEW_COMMAND, ["file:///p.md"])]  # type: ignore[union-attr]
    params.context.only = [types.CodeActionKind.Source]
    only_source = code_actions(
        result, index, "utf-16", params, version=4, literal_support=True, document_changes=False
    )
    assert [a.kind for a in only_source] == [PREVIEW_KIND]  # type: ignore[union-attr]


# --- hover and session facts -------------------------------------------------------------------


async def test_hover_and_facts(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    text = f"{mention('s-alpha', 'Refactor the parser')}   {noncanonical_uri('s-delta')}"
    result = await analyze(text, resolver, agent)
    found = hover_text(result, 3, markdown=False, now_ms=NOW_MS)
    assert found is not None
    shown, span = found
    assert span.session_id == "s-alpha"
    assert "id s-alpha" in shown and "mentioning it costs" in shown and "of 65,536 bytes" in shown
    found = hover_text(result, len(text) - 2, markdown=True, now_ms=NOW_MS)
    assert found is not None and "its canonical URI" in found[0]
    assert (
        hover_text(result, len(mention("s-alpha", "Refactor the parser")) + 1, markdown=False, now_ms=0)
        is None
    )
    facts = await read_session_facts(resolver, "s-beta", "Notes\nsecond line \x1b[1mbold")
    summary = session_summary(facts, markdown=True, now_ms=NOW_MS)
    assert summary.startswith("**Notes\\\\x0asecond line \\\\x1b\\[1mbold**")
    assert "remember the deploy steps" in summary and "cwd" not in summary and " in " not in summary
    # Messages keep their line breaks (Markdown hard breaks inside a quote), never a literal \x0a.
    assert "\\x0a" not in summary.split("last asked:")[1]
    last = session_summary(facts, markdown=False, now_ms=NOW_MS, id_last=True).splitlines()
    assert last[-1] == "id s-beta" and "id s-beta" not in last[:-1]
    missing = await read_session_facts(resolver, "s-missing", "s-missing")
    assert missing.error is not None and "not found" in missing.error


@pytest.mark.parametrize("markdown", [True, False])
async def test_hover_on_an_invalid_mention_adds_to_the_diagnostic_without_repeating_it(
    resolver: SessionReferenceResolver, agent: AgentRef, markdown: bool
) -> None:
    """Editors show the diagnostic in the same popup as the hover: the hover must not say it again."""
    broken = "dsh-session:!!"
    text = f"{noncanonical_uri('s-delta')} @[x]({broken}) dsh-session:MTIz"
    result = await analyze(text, resolver, agent)
    messages = [finding.message for finding in result.findings]
    assert len(messages) == 3
    spans = result.spans
    hovers = []
    for span, message in zip(spans, messages, strict=True):
        found = hover_text(result, span.start + 1, markdown=markdown, now_ms=NOW_MS)
        assert found is not None and found[1] is span
        shown = found[0].replace("\\", "")
        reason = span.reason.replace("\\", "")
        assert reason not in shown and message not in shown, shown
        hovers.append(shown)
    # Recoverable: the session it meant, by title, and what its URI should be.
    assert hovers[0].startswith("meant: Deploy checklist (id ")
    assert encode_session_reference_uri("s-delta") in hovers[0]
    assert hovers[0].count("dsh-session:") == 1  # the URI once, not twice
    # Unrecoverable: what a mention looks like and how to insert one, in the mention's own form.
    assert "@[label](dsh-session:…)" in hovers[1] and "base64url" in hovers[1]
    assert "dsh-session:…" in hovers[2] and "@[label]" not in hovers[2]
    assert all("insert a mention" in hover for hover in hovers[1:])
    code = "`@[label](dsh-session:…)`" if markdown else " @[label](dsh-session:…):"
    assert code in hovers[1]


# --- preview and summary -----------------------------------------------------------------------


def test_preview_uris_round_trip() -> None:
    uri = "file:///work/my%20notes.md"
    preview = preview_uri(uri)
    assert preview.startswith("dsh-preview:/my%20notes.md%20%28context%29.txt?")
    assert document_of_preview(preview) == uri
    assert document_of_preview("file:///x") is None


def test_a_closed_documents_previews_are_all_forgotten() -> None:
    """Both the context preview and the model text go when their document closes; another
    document's stay."""
    kept = KeptPreviews()
    for document in ("file:///w/a.md", "file:///w/b.md"):
        for model_text in (False, True):
            kept.keep(Preview(preview_uri(document, model_text=model_text), document, "", True))
    kept.forget("file:///w/a.md")
    assert sorted(map(document_of_preview, kept.uris)) == ["file:///w/b.md", "file:///w/b.md"]


async def test_preview_shows_the_accounting_and_what_the_model_reads(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    text = f"Please compare {mention('s-alpha', 'Refactor the parser')} and {mention('s-beta', 'notes')}."
    preview = await build_preview("file:///w/p.md", await analyze(text, resolver, agent), resolver, agent)
    assert preview.ok
    assert "Please compare @Refactor the parser and @notes." in preview.text
    assert "[1] Refactor the parser" in preview.text and "[2] notes" in preview.text
    assert "KB of 64 KB (" in preview.text and "of 65,536 bytes" in preview.text and "tokens" in preview.text
    assert preview.summary.startswith("2 sessions referenced;") and " KB (" in preview.summary
    # The JSON the model receives is one command away, not in the preview.
    assert "<referenced-sessions>" not in preview.text and "DSH: Show model-facing text" in preview.text
    failed = await build_preview(
        "file:///w/p.md", await analyze(mention(TARGET_ID), resolver, agent), resolver, agent
    )
    assert not failed.ok
    assert (
        failed.summary
        == 'prepare failed: SESSION_REFERENCE_SELF_REFERENCE: session "target-session" cannot reference itself'
    )
    plain = await build_preview(
        "file:///w/p.md", await analyze("no mentions", resolver, agent), resolver, agent
    )
    assert plain.ok and plain.summary.startswith("no sessions referenced")


async def test_the_model_text_is_what_prepare_prints(
    resolver: SessionReferenceResolver, agent: AgentRef
) -> None:
    """Byte for byte the CLI's ``prepare`` form of a real ``prepare`` (the analysis it is made
    from holds the same reads and retention)."""
    text = f"Please compare {mention('s-alpha', 'Refactor <the> parser')} and {mention('s-gamma', 'big')}."
    model = await build_model_text("file:///w/p.md", await analyze(text, resolver, agent), resolver, agent)
    parsed = parse_session_reference_text(text)
    prepared = await resolver.prepare(agent, [{"type": "text", "text": parsed.text}], parsed.references)
    assert model.ok and model.text == render_prepared_report(parsed.text, prepared, resolver.config) + "\n"
    assert model.uri.startswith("dsh-preview:/p.md%20%28model%20text%29.txt?") and is_model_text(model.uri)
    assert document_of_preview(model.uri) == "file:///w/p.md"
    assert prepared.additional_context is not None
    # Each line of both messages after the gutter, exactly: no line of theirs reads as the report's.
    assert "\n".join(gutter(prepared.additional_context.text)) in model.text
    assert "\n".join(gutter(parsed.text)) in model.text
    failed = await build_model_text(
        "file:///w/p.md", await analyze(mention(TARGET_ID), resolver, agent), resolver, agent
    )
    assert (
        failed.text
        == 'error: SESSION_REFERENCE_SELF_REFERENCE: session "target-session" cannot reference itself\n'
    )


async def test_the_preview_is_made_for_reading(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    """Messages as text (a heading with the role and the time, real line breaks, long lines
    wrapped), ``<`` as it was written, and no line wider than the wrap."""
    text = f"Please compare {mention('s-alpha', 'Refactor <the> parser')} and {mention('s-gamma', 'big')}."
    analysis = await analyze(text, resolver, agent)
    preview = await build_preview("file:///w/my%20prompt.md", analysis, resolver, agent, "Target title")
    lines = preview.text.splitlines()
    assert lines[1] == "document: /w/my prompt.md"
    assert lines[2] == f"target session: Target title ({TARGET_ID})"
    assert max(len(line) for line in lines) <= 104  # wrapped at 100, indented by 4
    headings = [line.strip() for line in lines if line.strip().startswith("── ")]
    assert headings[0].startswith("── 1 · user · 20") and headings[0].endswith(" UTC ──")
    assert any(line.strip().startswith("── 2 · assistant · ") for line in lines)
    assert "    │ How should we split uri.py?" in lines  # every line of a message in the gutter
    assert "    │ " + "x" * 98 in lines  # s-gamma's 3,000-character message, wrapped at 100 with the gutter
    assert "│ Please compare @Refactor <the> parser and @big." in lines
    assert "\\u003c" not in preview.text
    untitled = await build_preview("file:///w/p.md", analysis, resolver, AgentRef(None, "/w"))
    assert untitled.text.splitlines()[2].startswith("target session: none")


async def test_document_summary(resolver: SessionReferenceResolver, agent: AgentRef) -> None:
    ok = await analyze(f"{mention('s-alpha')} {mention('s-alpha')}", resolver, agent)
    summary = document_summary(ok)
    assert summary["mentions"] == 2 and summary["sessions"] == 1 and summary["errors"] == 0
    assert summary["bytes"] > 0 and summary["tokens"] > 0
    assert COUNTER.wait(30)  # the `tokens` extra is a dev dependency: counts are DeepSeek's own
    exact = document_summary(ok)
    parsed = parse_session_reference_text(ok.text)
    context = build_additional_context(
        [reference.retained for reference in ok.references if reference.retained]
    )
    fresh = TokenCounter()  # its own cache: the sum is of the two messages, counted apart
    assert fresh.wait(30)
    expected = fresh.count(parsed.text) + fresh.count(context.text)
    assert exact["tokensExact"] is True and exact["tokens"] == expected.tokens
    bad = document_summary(await analyze("dsh-session:IiJ", resolver, agent))
    assert bad == {
        "mentions": 1,
        "sessions": 0,
        "errors": 1,
        "bytes": None,
        "tokens": None,
        "tokensExact": False,
    }


async def test_a_code_lens_is_for_the_text_the_document_holds_when_it_answers(
    resolver: SessionReferenceResolver, agent: AgentRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neovim 0.7 shows a late code lens whatever text it asked about, and drops the refresh it
    asks for meanwhile: an edit that lands while the message's total is made must get lenses on
    the new text's lines, not the old text's."""
    before = f"# Notes\n\n{mention('s-alpha')}\n"
    after = f"# Notes\n{mention('s-alpha')}\n\n"
    document = Document("file:///prompt.md", LineIndex(before), 1)

    async def analysis(uri: str) -> Analysed:
        index = document.index
        return Analysed(document, await analyze(index.text, resolver, agent), document.version, index)

    def total_while_an_edit_lands(analysis: Analysis) -> dict[str, object]:
        if document.index.text == before:
            document.index, document.version = LineIndex(after), 2
        return document_summary(analysis)

    monkeypatch.setattr(inline_feature, "document_summary", total_while_an_edit_lands)
    services = SimpleNamespace(
        settings=Settings(), analysis=analysis, encoding="utf-16", client_command=lambda name: None
    )
    params = types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=document.uri))
    lenses = await InlineCosts(services).code_lens(params)  # type: ignore[arg-type]
    assert [lens.range.start.line for lens in lenses] == [1, 1]
    assert [lens.command and lens.command.title for lens in lenses][1:] == ["Preview"]
    assert document.index.text == after


# --- the cache ----------------------------------------------------------------------------------


def test_cache_sees_new_sessions_and_titles(tmp_path: Path) -> None:
    root = write_store(tmp_path / "s", [Spec("one", "/w", "First", [("user", "hi")])], "none")
    source = open_live(str(root))
    records = source.list_sessions()
    assert [r.id for r in records] == ["one"]
    assert source.list_sessions() == records
    assert [o.title for o in source.read_titles(records)] == ["First"]
    write_store(root, [Spec("two", None, "Second", [("user", "yo")], age_minutes=-1)], "none")
    records = source.list_sessions()
    assert [r.id for r in records] == ["two", "one"]
    append_title(root, "one", "Renamed")
    assert [o.title for o in source.read_titles(source.list_sessions())] == ["Second", "Renamed"]
    first = source.read_surface("one")
    assert source.read_surface("one") is first  # unchanged log: served from memory
    append_title(root, "one", "Again")
    assert source.read_surface("one") is not first


def test_rows_fit_vscodes_default_popup_with_age_and_project_whole() -> None:
    """VS Code cuts a row's description (age, project) before its label when both do not fit its
    default popup: for a client that declares its row width and filters on filterText the label is
    shortened instead, to that width with the description at its smaller size; a client filtering on
    the label, or declaring no width, gets it whole, and what a pick inserts and resolve reads keep
    the whole title."""
    title = "Investigate editor extension packaging follow-up, then the release notes"
    candidates = [
        Candidate("s-1", title, "/home/dev/editor-extension", NOW_MS - 330 * 86_400_000),
        Candidate("s-2", "翻译文档的术语表" * 4, "/home/dev/web-client", NOW_MS - 86_400_000),
        Candidate("s-3", "Short title", "/home/dev/" + "x" * 80, NOW_MS),
    ]
    edit_range = types.Range(start=types.Position(0, 0), end=types.Position(0, 1))
    items = completion_items(
        candidates, edit_range, now_ms=NOW_MS, label_details=True, row_columns=ROW_COLUMNS
    )
    for item in items:
        description = item.label_details.description if item.label_details else None
        assert description is not None
        used = columns(item.label) + DESCRIPTION_GAP + DESCRIPTION_SCALE * columns(description)
        assert used <= ROW_COLUMNS, (item.label, description)
    assert items[0].label.endswith("…") and title.startswith(items[0].label[:-1])
    assert items[0].label_details == types.CompletionItemLabelDetails(description="11 mo · editor-extension")
    assert items[1].label_details == types.CompletionItemLabelDetails(description="1 d · web-client")
    assert items[2].label == "Short title" and "…" in (items[2].label_details.description or "")  # type: ignore[union-attr]
    assert item_data(items[0]) == ("s-1", title)
    assert items[0].text_edit.new_text == mention("s-1", title)  # type: ignore[union-attr]
    assert items[0].filter_text is not None and title in items[0].filter_text
    whole = completion_items(
        candidates, edit_range, now_ms=NOW_MS, label_details=True, filter_text=False, row_columns=ROW_COLUMNS
    )
    undeclared = completion_items(candidates, edit_range, now_ms=NOW_MS, label_details=True)
    for rows in (whole, undeclared):
        assert [item.label for item in rows] == [title, "翻译文档的术语表" * 4, "Short title"]


def test_a_row_width_is_taken_only_as_a_client_declares_a_plausible_one() -> None:
    """``completionRowColumns`` comes from the client (the VS Code extension declares its popup's
    width); a value no popup has, or of another type, leaves the titles whole."""
    from dsh_session_reference.lsp.features import create_server

    ls = create_server(None)
    declared: list[object] = [46, 80.5, True, 5, "46", 1e9, None]
    seen = []
    for width in declared:
        ours = {} if width is None else {"completionRowColumns": width}
        ls.protocol.client_capabilities = types.ClientCapabilities(experimental={"dshSessionReference": ours})
        seen.append(ls.completion_columns())
    assert seen == [46.0, 80.5, None, None, None, None, None]
    ls.protocol.client_capabilities = types.ClientCapabilities()
    assert ls.completion_columns() is None


async def test_quick_fixes_over_a_select_all_find_their_diagnostics_in_one_sweep(
    resolver: SessionReferenceResolver, agent: AgentRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fix names the diagnostics on its own mention, as before; a select-all over many broken
    mentions no longer compares every diagnostic with every fix (on the event loop: 100 million
    comparisons at 10,000 mentions)."""
    count = 800
    text = "".join(f"line {n}: @[x{n}](dsh-session:IiJ) and more\n" for n in range(count))
    result = await analyze(text, resolver, agent)
    index = LineIndex(result.text)
    diagnostics = to_diagnostics(result, index)
    assert len(diagnostics) == count
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri="file:///p.md"),
        range=types.Range(start=types.Position(0, 0), end=types.Position(count, 0)),
        context=types.CodeActionContext(diagnostics=diagnostics),
    )
    compared = 0
    overlaps = actions_module._overlaps

    def counted(a: types.Range, b: types.Range) -> bool:
        nonlocal compared
        compared += 1
        return overlaps(a, b)

    monkeypatch.setattr(actions_module, "_overlaps", counted)
    fixes = quick_fixes(result, index, params, None)
    assert len(fixes) == count  # "Remove this mention" on each
    for line, fix in enumerate(fixes):
        assert [d.range.start.line for d in fix.diagnostics or []] == [line], fix.title
    assert compared <= 4 * count, compared  # every pair: 640,000


def quick_fixes(
    result: Analysis, index: LineIndex, params: types.CodeActionParams, suggest_command: str | None
) -> list[types.CodeAction]:
    """The quick fixes ``code_actions`` offers a client that takes literal actions."""
    found = code_actions(
        result,
        index,
        "utf-16",
        params,
        version=1,
        literal_support=True,
        document_changes=False,
        suggest_command=suggest_command,
    )
    return [a for a in found if isinstance(a, types.CodeAction) and a.kind == types.CodeActionKind.QuickFix]


class _RecordedProgress:
    """The work-done progress calls a server makes, recorded (the client accepts every token)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    async def create_async(self, token: str) -> None:
        self.sent.append(("create", token))

    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None:
        self.sent.append(("begin", value))

    def report(self, token: str, value: types.WorkDoneProgressReport) -> None:
        self.sent.append(("report", value))

    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None:
        self.sent.append(("end", value))


def _titles_progress(*, done: bool, supported: bool = True) -> list[tuple[str, object]]:
    """What :func:`titles_with_progress` sends for a completion's titles, read for 20 ms (or
    already read), with 3,040 sessions walked."""
    from dsh_session_reference.lsp.progress import titles_with_progress

    progress = _RecordedProgress()
    host = SimpleNamespace(
        work_done_progress=progress,
        store=SimpleNamespace(walked_sessions=3040),
        capability=lambda path, default=None: supported,
    )

    async def run() -> None:
        titles: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if done:
            titles.set_result(None)
        showing = asyncio.ensure_future(titles_with_progress(host, host.store, titles))
        await asyncio.sleep(0.02)
        assert not showing.done() or done or not supported  # it waits on the titles
        if not titles.done():
            titles.set_result(None)
        await showing

    asyncio.run(run())
    return progress.sent


def test_a_completion_reading_titles_after_the_walk_shows_the_listing_progress_until_they_are_read() -> None:
    """The first `@` over a cold root whose walk ended before it (the VS Code extension starts the
    server before the editor is up) answers "Listing dsh sessions…" while it reads titles: the
    listing's progress shows again, at once, and ends when they are read."""
    sent = _titles_progress(done=False)
    assert [kind for kind, _ in sent] == ["create", "begin", "end"], sent
    begin, end = sent[1][1], sent[2][1]
    assert isinstance(begin, types.WorkDoneProgressBegin) and isinstance(end, types.WorkDoneProgressEnd)
    assert (begin.title, begin.message) == ("Listing dsh sessions", "3,040 sessions read; reading titles")
    assert end.message == "3,040 sessions read"


def test_titles_already_read_or_a_client_without_progress_shows_none() -> None:
    assert _titles_progress(done=True) == []
    assert _titles_progress(done=False, supported=False) == []


def test_a_completion_asked_again_for_the_same_query_joins_the_candidates_being_found() -> None:
    """VS Code cancels and asks again for the popup it has open (three times in a row for one `@`
    as a client started, over a cold root): the same query joins the work under way, where each ask
    used to begin it again; another query supersedes it (aborted), and stopping aborts the rest."""
    from dsh_session_reference.lsp.features.completion import Completion

    asked: list[tuple[str, AbortSignal]] = []
    found = asyncio.Event()

    async def list_candidates(agent: object, query: str, signal: AbortSignal) -> list[object]:
        asked.append((query, signal))
        await found.wait()
        return []

    async def agent_for(uri: str | None) -> object:
        return object()

    services = SimpleNamespace(
        agent_for=agent_for, engine=SimpleNamespace(resolver=SimpleNamespace(list_candidates=list_candidates))
    )
    feature = Completion(services)  # type: ignore[arg-type]

    async def run() -> None:
        first = feature._start("file:///p.md", "mig")
        await asyncio.sleep(0)
        assert feature._start("file:///p.md", "mig") is first
        other = feature._start("file:///q.md", "mig")  # another document: its own
        await asyncio.sleep(0)
        assert [query for query, _ in asked] == ["mig", "mig"]
        newer = feature._start("file:///p.md", "migr")
        await asyncio.sleep(0)
        assert asked[0][1].aborted and not asked[1][1].aborted and not asked[2][1].aborted
        feature.stop()
        assert all(signal.aborted for _, signal in asked)
        found.set()
        assert await asyncio.gather(first, other, newer) == [[], [], []]
        assert feature.running == {}  # each ended and let go of its entry
        again = feature._start("file:///p.md", "mig")  # done work is not joined: asked anew
        assert again is not first
        await again
        assert len(asked) == 4
        found.clear()
        stale = feature._start("file:///p.md", "mig")
        await asyncio.sleep(0)
        feature.reset()  # new settings (another root, say): what runs was asked under the old ones
        assert asked[4][1].aborted and feature._start("file:///p.md", "mig") is not stale
        found.set()
        await asyncio.sleep(0.01)

    asyncio.run(run())
