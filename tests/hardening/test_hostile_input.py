"""Hostile ids and text: path syntax, NUL, every control character, drive letters, 1 MB ids, bidi
overrides, and a 10 MB document with 100k mentions.

An id comes from a URI anyone can type. It may only ever name one safe path
segment under the root, so the proof here is behavioural *and* observed: the
processes that read these ids run under an audit hook, and nothing they open
or list may lie outside the root (beside the interpreter's own files), least
of all the sentinel session placed right next to it for an escape to find.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from lsp_harness import lsp_session, server_pid
from lsprotocol import types

from dsh_session_reference.analysis import TOO_MANY_REFERENCES, UNKNOWN_SESSION
from dsh_session_reference.dsh_profile import DEFAULT_PROFILE, PATCH_FILENAME
from dsh_session_reference.errors import READ_FAILED, SessionReferenceError
from dsh_session_reference.jsjson import js_normalize, js_stringify
from dsh_session_reference.model import StoreError
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.snapshot import PROMPT_PREFIX, PROMPT_SUFFIX
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.layout import dsh_home, encode_segment
from dsh_session_reference.uri import (
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)
from store.logbuild import header, lines, one_turn, put, title

from .audit import (
    Audit,
    audited_env,
    audited_server_command,
    cache_dir,
    interpreter_read,
    is_under,
    run_audited,
    vm_kb,
)
from .corpus import SECRET

CONTROLS = "".join(chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)])
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
HOSTILE_IDS = [
    ".",
    "..",
    "../outside",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "a/../../outside",
    "..\\..\\outside",
    "\\\\server\\share\\file",
    "C:\\Windows\\System32\\config",
    "C:",
    "c:/outside",
    "a\x00b",
    "\x00",
    "../outside\x00.jsonl",
    "~002E~002E",
    "--w--",
    "_no-cwd",
    "session.jsonl",
    CONTROLS,
    BIDI + "../outside",
    "\ud800/..",
    "x" * 1_000_000,
    *CONTROLS,
]
SYSTEM_READS = re.compile(r"/dev/(null|urandom|tty)|/proc/self/.*|/etc/(localtime|ld\.so\.cache)")
"""What the interpreter itself may read outside the root and its own installation."""
UNSAFE_FOR_TERMINALS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


@pytest.fixture(scope="module")
def guarded_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with one real session and, right beside it, a sentinel any escape would read."""
    base = tmp_path_factory.mktemp("guarded")
    root = base / "sessions"
    put(root, "real", lines(header("real"), *one_turn(0, "real question", "real answer"), title(6, "Real")))
    for where in ("outside", "etc"):
        put(base / where, "outside", lines(header("outside"), *one_turn(0, SECRET, SECRET), title(6, SECRET)))
    (base / "etc" / "passwd").write_text(SECRET)
    return root


DSH_PROFILE_READS = {
    os.path.join(dsh_home({}), "profiles", DEFAULT_PROFILE, PATCH_FILENAME),
    os.path.join(dsh_home({}), PATCH_FILENAME),
}
"""The two files dsh composes its budgets from (the audited processes have no ``$DSH_HOME``): read,
as documented, and nothing else of dsh's home."""


def assert_contained(audit: Audit, root: Path, inputs: tuple[Path, ...] = ()) -> None:
    """Every path opened or listed is in the root, the interpreter's installation, a system file the
    interpreter reads, dsh's two profile files, or one of the test's own ``inputs``; none is the
    sentinel beside the root."""
    stray = [
        path
        for path in audit.paths()
        if not is_under(path, root)
        and not interpreter_read(path)
        and not SYSTEM_READS.fullmatch(path)
        and path not in DSH_PROFILE_READS
        and not any(is_under(path, given) for given in inputs)
    ]
    assert stray == []
    assert not any("passwd" in path or "outside" in path for path in audit.paths())
    assert audit.writes_under(root) == []


def test_hostile_ids_round_trip_and_are_simply_not_found(guarded_root: Path) -> None:
    store = JsonlSessionStore(guarded_root)
    for session_id in HOSTILE_IDS:
        uri = encode_session_reference_uri(session_id)
        assert decode_session_reference_uri(uri) == js_normalize(session_id)
        parsed = parse_session_reference_text(f"a {format_session_reference_mention(session_id, 'l')} b")
        assert [r.session_id for r in parsed.references] == [js_normalize(session_id)]
        segment = encode_segment(session_id)
        assert segment not in (".", "..") and not set(segment) & set("/\\\x00:")
        started = time.monotonic()
        with pytest.raises(StoreError) as caught:
            store.read_surface(session_id)
        assert caught.value.message == f'session "{js_normalize(session_id)}" not found'
        assert time.monotonic() - started < 2.0


async def test_the_resolver_reports_hostile_ids_as_unknown(guarded_root: Path) -> None:
    resolver = SessionReferenceResolver(JsonlSessionStore(guarded_root))
    agent = AgentRef(None, "/w")
    for session_id in HOSTILE_IDS:
        with pytest.raises(SessionReferenceError) as caught:
            await resolver.prepare(agent, [], [{"sessionId": session_id}, {"sessionId": "real"}])
        assert caught.value.code == READ_FAILED
        assert caught.value.message.endswith(f'session "{js_normalize(session_id)}" not found')
    assert [c.session_id for c in await resolver.list_candidates(agent, "outside")] == []


def mention_documents(directory: Path) -> list[tuple[Path, list[str]]]:
    """Documents of at most three hostile mentions each (so every one of them is read)."""
    directory.mkdir(exist_ok=True)
    out = []
    for start in range(0, len(HOSTILE_IDS), 3):
        ids = HOSTILE_IDS[start : start + 3]
        path = directory / f"doc-{start}.md"
        path.write_text(
            " ".join(format_session_reference_mention(i, "label") for i in ids), "utf-8", "surrogatepass"
        )
        out.append((path, ids))
    return out


def test_the_library_and_the_cli_read_nothing_outside_the_root(guarded_root: Path, tmp_path: Path) -> None:
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps(HOSTILE_IDS))
    probe = run_audited(
        [str(guarded_root), "@" + str(ids_file)], tmp_path / "probe.log", module="hardening.probe_store"
    )
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)
    assert result["listed"] == ["real"]
    for session_id in HOSTILE_IDS:
        expected = f'session "{js_normalize(session_id)}" not found'
        assert result["reads"][js_normalize(session_id)] == [
            "error",
            "SESSION_QUERY_SESSION_NOT_FOUND",
            expected,
        ]
    assert_contained(probe.audit, guarded_root, (ids_file, cache_dir(tmp_path / "probe.log")))

    documents = mention_documents(guarded_root.parent / "docs")
    checked = run_audited(
        ["check", "--json", "--sessions", str(guarded_root), *[str(path) for path, _ in documents]],
        tmp_path / "check.log",
    )
    assert checked.returncode == 1
    for (path, ids), entry in zip(documents, json.loads(checked.stdout)["files"], strict=True):
        assert entry["file"] == str(path)
        assert [d["code"] for d in entry["diagnostics"]] == [UNKNOWN_SESSION] * len(ids)
    assert SECRET not in checked.stdout + checked.stderr
    assert_contained(
        checked.audit, guarded_root, (guarded_root.parent / "docs", cache_dir(tmp_path / "check.log"))
    )


async def test_the_language_server_reads_nothing_outside_the_root(
    guarded_root: Path, tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, guarded_root) as s:
        for path, ids in mention_documents(tmp_path / "lsp-docs"):
            started = time.monotonic()
            uri = s.open(workspace, path.read_text("utf-8", "surrogatepass"))
            found = await s.diagnostics(uri, lambda d: len(d) > 0)
            assert [d.code for d in found] == [UNKNOWN_SESSION] * len(ids)
            assert time.monotonic() - started < 10
            preview = await s.command("dshSessionReference.preview", uri)
            assert preview["ok"] is False and SECRET not in preview["text"]
        completion = await s.complete(s.open(workspace, "@outside"))
        assert list(completion.items) == []
    assert_contained(Audit.read(log), guarded_root, (cache_dir(log),))


@pytest.fixture(scope="module")
def unruly_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session whose title and cwd carry terminal escapes, controls and bidi overrides."""
    root = tmp_path_factory.mktemp("unruly") / "sessions"
    cwd = "/w/\x1b[31mred\x1b[0m\u202e"
    put(
        root,
        "s-unruly",
        lines(
            header("s-unruly", cwd=cwd),
            *one_turn(0, "\x1b]0;owned\x07 hi <b>", "\u202eanswer"),
            title(6, TITLE),
        ),
        cwd=cwd,
    )
    return root


TITLE = "\u202eevil\u202c \x1b]0;owned\x07 \x1b[2J\r\nnext\x9b31m\x00end"
LABEL = "\u202e\x1b[2J\x00lab\\]el\u2066\x85"


def test_control_and_bidi_labels_stay_data() -> None:
    """Labels are kept exactly (upstream parity) and the snapshot frames them as escaped JSON."""
    mention = format_session_reference_mention("s-unruly", LABEL)
    parsed = parse_session_reference_text(f"see {mention}")
    assert [(r.session_id, r.label) for r in parsed.references] == [("s-unruly", LABEL)]
    assert parsed.text == f"see @{LABEL}"


async def test_control_and_bidi_labels_reach_no_prompt_framing_or_terminal(
    unruly_root: Path, tmp_path: Path
) -> None:
    resolver = SessionReferenceResolver(JsonlSessionStore(unruly_root))
    prepared = await resolver.prepare(AgentRef(None, "/w"), [], [{"sessionId": "s-unruly", "label": LABEL}])
    assert prepared.additional_context is not None
    prompt = prepared.additional_context.text
    data = prompt[len(PROMPT_PREFIX) : len(prompt) - len(PROMPT_SUFFIX)]
    assert not re.search("[\x00-\x1f<]", data)  # JSON escapes every C0 control; every < is \u003c
    assert json.loads(data)[0]["label"] == LABEL and js_stringify(LABEL)[1:-1].replace("<", "") in data

    document = tmp_path / "prompt.md"
    document.write_text(f"see {format_session_reference_mention('s-unruly', LABEL)}\n")
    bad = tmp_path / "bad.md"
    bad.write_text(format_session_reference_mention("\x1b[2J\x9b", LABEL))
    common = ["--sessions", str(unruly_root)]
    runs = [
        run_audited(["candidates", *common], tmp_path / "a.log"),
        run_audited(["candidates", "evil", *common], tmp_path / "a.log"),
        run_audited(["prepare", *common, str(document)], tmp_path / "a.log"),
        run_audited(["check", *common, str(document), str(bad)], tmp_path / "a.log"),
        run_audited(["prepare", *common, str(bad)], tmp_path / "a.log"),
    ]
    for run in runs:
        assert run.stdout + run.stderr, "each command says something"
        assert not UNSAFE_FOR_TERMINALS.search(run.stdout + run.stderr), (run.stdout, run.stderr)
    assert "evil" in runs[0].stdout and "\\x1b]0;owned\\x07" in runs[0].stdout


def test_skipped_logs_are_reported_without_their_escapes(tmp_path: Path) -> None:
    """A skipped log's warning names its folder and header id, both anyone could have written."""
    root = tmp_path / "sessions"
    put(root, "good", lines(header("good"), *one_turn(0)), cwd="/w")
    evil_id = "id\x1b]0;owned\x07\x1b[2J"
    folder = Path(os.fsdecode(os.fsencode(root / "proj\x1b[31m") + b"\xff"))
    (folder / "s").mkdir(parents=True)
    (folder / "s" / "session.jsonl").write_bytes(lines(header(evil_id), *one_turn(0)))
    for args in (["candidates"], ["--json", "candidates"]):
        run = run_audited(["--sessions", str(root), *args], tmp_path / "a.log")
        assert run.returncode == 0, run.stderr
        assert "skipping" in run.stderr and not UNSAFE_FOR_TERMINALS.search(run.stderr), run.stderr
        assert "proj\\x1b[31m\\xff" in run.stderr and "id\\x1b]0;owned\\x07\\x1b[2J" in run.stderr


async def test_control_and_bidi_text_in_the_editor(
    unruly_root: Path, tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, unruly_root) as s:
        uri = s.open(workspace, "@")
        [item] = (await s.complete(uri)).items
        assert item.text_edit is not None
        shown = [item.label, item.text_edit.new_text, item.detail or ""]
        resolved = await s.client.completion_item_resolve_async(item)
        documentation = resolved.documentation
        assert isinstance(documentation, types.MarkupContent)
        for text in [*shown, documentation.value.replace("\n", "")]:  # filterText is never shown
            assert not re.search("[\x00-\x1f\x7f-\x9f]", text), text
        # The inserted mention parses back to the escaped title and has no error.
        s.apply(uri, types.WorkspaceEdit(changes={uri: [item.text_edit]}))  # type: ignore[list-item]
        assert [d for d in await s.diagnostics(uri) if d.severity == types.DiagnosticSeverity.Error] == []
        doc = s.open(workspace, f"x {format_session_reference_mention('s-unruly', LABEL)} y")
        [hint] = await s.diagnostics(doc, lambda d: len(d) == 1)
        assert hint.code == "stale-label" and not re.search("[\x00-\x1f]", hint.message)
        assert hint.range.start == types.Position(0, 2)  # UTF-16 columns, whatever the bidi controls do
        hover = await s.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(0, 4)
            )
        )
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", hover.contents.value)


def hundred_thousand_mentions() -> str:
    """~10 MB: 100k mentions (valid, duplicate, unknown, bare and malformed) amid filler."""
    parts = []
    for n in range(100_000):
        kind = n % 4
        if kind == 0:
            parts.append(format_session_reference_mention("real", "Real"))
        elif kind == 1:
            parts.append(format_session_reference_mention(f"unknown-{n}", "x"))
        elif kind == 2:
            parts.append(encode_session_reference_uri("real") + " ")
        else:
            parts.append(f"@[bad](dsh-session:%%{n})")
    text = " some filler words between mentions ".join(parts)
    return text + "\n" + "z" * (10_000_000 - len(text))


async def test_a_10_mb_document_with_100k_mentions(
    guarded_root: Path, tmp_path: Path, workspace: Path
) -> None:
    text = hundred_thousand_mentions()
    assert len(text) > 10_000_000
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, guarded_root) as s:
        started = time.monotonic()
        uri = s.open(workspace, text)
        found = await s.diagnostics(uri, within=120)
        elapsed = time.monotonic() - started
        assert elapsed < 60, elapsed
        assert len(found) == 1001 and found[-1].code == "more-problems"
        assert {d.code for d in found[:1000]} >= {"malformed-uri", TOO_MANY_REFERENCES}
        summary = await s.command("dshSessionReference.documentSummary", uri)
        assert summary["mentions"] == 100_000 and summary["errors"] > 0 and summary["bytes"] is None
        s.type_text(uri, " @rea")  # still responsive: completion at the end of the 10 MB text
        assert [item.label for item in (await s.complete(uri)).items] == ["Real"]
        assert vm_kb(server_pid(s), "VmHWM") < 400 * 1024  # measured: ~100 MiB
    assert Audit.read(log).writes_under(guarded_root) == []
