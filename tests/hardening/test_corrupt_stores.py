"""The corrupt-store corpus through every face: the store, the resolver, the CLI and the language server.

One root holds every case of :mod:`corpus` next to healthy sessions, so each
face is also shown to keep serving the healthy ones. The CLI and the server
run as subprocesses under the audit hook, which also reports their peak
memory: the 200 MB line and the 2 GiB bombs must cost a bounded amount of
both time and memory.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from lsp_harness import lsp_session, server_pid
from lsprotocol import types

from dsh_session_reference.analysis import READ_FAILED as READ_FAILED_CODE
from dsh_session_reference.analysis import UNKNOWN_SESSION
from dsh_session_reference.errors import READ_FAILED, SessionReferenceError
from dsh_session_reference.model import StoreError
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.uri import format_session_reference_mention

from .audit import Audit, Run, audited_env, audited_server_command, is_under, run_audited, vm_kb
from .corpus import CASES, SECRET, Case, Ok, build_root, outside_dir

PEAK_LIMIT_KB = 200 * 1024
"""Peak RSS any face may reach on this corpus (Python itself is ~25 MB; a line is capped at 32 MiB)."""
TOKENIZER_KB = 80 * 1024
"""What the language server holds besides once a document mentions a session, with the `tokens`
extra installed (a dev dependency): DeepSeek's tokenizer, 60-70 MB, loaded once (docs/limits.md)."""
READ_SECONDS = 15.0
"""Wall time any single read may take: a guard against reads that never end or expand a bomb in
full, not a speed goal (those live in the benchmarks). The heaviest case, a torn frame decoded
to its 512 MiB end and read again for its title while its log is too new to be trusted from the
index, takes 3-4.5 s through the audited server on a slow 2-core host."""


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_root(tmp_path_factory.mktemp("corpus") / "sessions")


def expected_labels() -> dict[str, str]:
    return {case.name: case.label or case.name for case in CASES if case.listed}


def read_failed(case: Case, root: Path) -> str:
    return f"failed to read referenced session: {case.message(root)}"


def test_the_store_reads_each_case_as_documented(corpus_root: Path) -> None:
    store = JsonlSessionStore(corpus_root)
    records = store.list_sessions()
    observations = store.read_titles(records)
    labels = {
        record.id: observation.title
        if observation.error is None and observation.title is not None
        else record.id
        for record, observation in zip(records, observations, strict=True)
    }
    assert labels == expected_labels()
    for case in CASES:
        started = time.monotonic()
        if isinstance(case.read, Ok):
            snapshot = store.read_surface(case.name)
            assert snapshot.captured_through_seq == case.read.captured, case.name
            texts = [block["text"] for event in snapshot.events for block in event["data"].get("content", [])]
            texts += [
                block["text"]
                for event in snapshot.events
                if event["type"] == "assistant/message"
                for block in event["data"]["message"]["content"]
            ]
            assert sorted(texts) == sorted(case.read.texts), case.name
        else:
            with pytest.raises(StoreError) as caught:
                store.read_surface(case.name)
            assert (caught.value.code, caught.value.message) == (case.read.code, case.message(corpus_root))
        assert time.monotonic() - started < READ_SECONDS, case.name


async def test_the_resolver_prepares_or_fails_each_case_alone(corpus_root: Path) -> None:
    resolver = SessionReferenceResolver(JsonlSessionStore(corpus_root), candidate_limit=100)
    agent = AgentRef(None, "/w")
    candidates = await resolver.list_candidates(agent)
    assert {c.session_id: c.label for c in candidates} == expected_labels()
    started = time.monotonic()  # a query reads every log's title: the heavy ones too
    found = await resolver.list_candidates(agent, "HEALTHY SESSION")
    assert [c.session_id for c in found] == ["healthy", "healthy-zstd"]
    assert time.monotonic() - started < READ_SECONDS
    for case in CASES:
        references = [{"sessionId": case.name}]
        if isinstance(case.read, Ok):
            prepared = await resolver.prepare(agent, [], references)
            context = prepared.additional_context
            assert context is not None
            [reference] = context.source["references"]
            assert reference["capturedThroughSeq"] == case.read.captured
            conversation = context.sources[0].data["conversation"]
            assert [item["text"] for item in conversation] == list(case.read.texts)
        else:
            with pytest.raises(SessionReferenceError) as caught:
                await resolver.prepare(agent, [], references)
            assert (caught.value.code, caught.value.message) == (READ_FAILED, read_failed(case, corpus_root))
    # All or nothing, as upstream: one bad source fails the message, and names itself.
    bad = next(case for case in CASES if case.name == "seq-gap")
    with pytest.raises(SessionReferenceError) as caught:
        await resolver.prepare(agent, [], [{"sessionId": "healthy"}, {"sessionId": bad.name}])
    assert caught.value.message == read_failed(bad, corpus_root)


def test_the_cli_reports_each_case_in_bounded_memory(corpus_root: Path, tmp_path: Path) -> None:
    common = ["--sessions", str(corpus_root), "--cwd", "/w"]
    listed = run_audited(["candidates", "--json", "--candidate-limit", "100", *common], tmp_path / "list.log")
    assert listed.returncode == 0, listed.stderr
    assert {row["sessionId"]: row["label"] for row in json.loads(listed.stdout)} == expected_labels()
    queried = run_audited(["candidates", "--json", "healthy session", *common], tmp_path / "query.log")
    assert [row["sessionId"] for row in json.loads(queried.stdout)] == ["healthy", "healthy-zstd"]
    assert queried.audit.peak_kb() < PEAK_LIMIT_KB

    documents = {}
    for case in CASES:
        documents[case.name] = tmp_path / f"{case.name}.md"
        documents[case.name].write_text(f"look at {format_session_reference_mention(case.name, 'it')}\n")
    # `check`: every case in one process, judged as the editor judges it.
    checked = run_audited(["check", "--json", *common, *map(str, documents.values())], tmp_path / "check.log")
    assert checked.returncode == 1
    report = {Path(entry["file"]).stem: entry for entry in json.loads(checked.stdout)["files"]}
    for case in CASES:
        errors = [d for d in report[case.name]["diagnostics"] if d["severity"] == "error"]
        if isinstance(case.read, Ok):
            assert errors == [], case.name
        else:
            [error] = errors
            assert error["code"] == (READ_FAILED_CODE if case.listed else UNKNOWN_SESSION), case.name
            assert case.message(corpus_root) in error["message"]
    assert checked.audit.peak_kb() < PEAK_LIMIT_KB
    # `check` shows no token counts, so it never loads the tokenizer (60-70 MB, which once took
    # this run past the limit above).
    assert not [path for path in checked.audit.paths() if path.endswith("tokenizer.json")]

    # `prepare`, one process per message as a script runs it: the heavy cases and one of each outcome.
    def prepare(case: Case) -> tuple[Case, Run]:
        return case, run_audited(
            ["prepare", "--json", *common, str(documents[case.name])], tmp_path / f"{case.name}.log"
        )

    chosen = [
        case for case in CASES if case.heavy or case.name in ("healthy-zstd", "seq-gap", "symlink-outside")
    ]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(prepare, chosen))
    for case, run in results:
        if isinstance(case.read, Ok):
            assert run.returncode == 0, (case.name, run.stderr)
            context = json.loads(run.stdout)["additionalContext"]
            assert context["source"]["references"][0]["capturedThroughSeq"] == case.read.captured
            assert all(text in context["content"][0]["text"] for text in case.read.texts)
        else:
            assert run.returncode == 1, (case.name, run.stdout)
            *warnings, last = run.stderr.splitlines()  # skipped artifacts are logged before the error
            assert all(line.startswith("skipping ") for line in warnings), warnings
            assert json.loads(last)["error"] == {
                "code": READ_FAILED,
                "message": read_failed(case, corpus_root),
            }
        assert run.audit.peak_kb() < PEAK_LIMIT_KB, (case.name, run.audit.peak_kb())
    for run in [listed, queried, checked] + [run for _, run in results]:
        assert SECRET not in run.stdout + run.stderr
        assert not any(is_under(path, outside_dir(corpus_root)) for path in run.audit.paths())
        assert run.audit.writes_under(corpus_root) == []


async def test_the_language_server_flags_each_case_and_stays_healthy(
    corpus_root: Path, workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    async with lsp_session(
        audited_server_command(), audited_env(log), workspace, corpus_root, candidateLimit=100
    ) as s:
        uri = s.open(workspace, "@")
        labels = {item.label for item in (await s.complete(uri)).items}
        assert labels == set(expected_labels().values())
        for case in CASES:
            started = time.monotonic()
            doc = s.open(
                workspace, f"see {format_session_reference_mention(case.name, case.label or case.name)}"
            )
            errors = [d for d in await s.diagnostics(doc) if d.severity == types.DiagnosticSeverity.Error]
            assert time.monotonic() - started < READ_SECONDS, case.name
            if isinstance(case.read, Ok):
                assert errors == [], (case.name, errors)
                continue
            [error] = errors
            assert error.code == (READ_FAILED_CODE if case.listed else UNKNOWN_SESSION), case.name
            assert case.message(corpus_root) in error.message
        healthy = s.open(workspace, format_session_reference_mention("healthy", "A healthy session"))
        preview = await s.command("dshSessionReference.preview", healthy)
        assert preview["ok"] is True and "hello" in preview["text"]
        assert vm_kb(server_pid(s), "VmHWM") < PEAK_LIMIT_KB + TOKENIZER_KB
    audit = Audit.read(log)
    assert audit.writes_under(corpus_root) == []
    assert not any(is_under(path, outside_dir(corpus_root)) for path in audit.paths())
