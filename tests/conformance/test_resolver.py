"""Generated differential cases for ``SessionReferenceResolver``: config validation, and
``list_candidates`` / ``prepare`` over whole sessions roots that upstream's own JSONL
persistence writes (zstd and plain, packed chunk rows on and off). Both sides read
the very same files; upstream's in-memory answers over the same sessions are
checked against its on-disk ones where the two must agree."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from dsh_session_reference.jsjson import js_normalize
from zstd_backends import zstd

from . import python_side as py
from .conftest import Oracle, Outcome, conformance_settings
from .strategies import (
    OMIT,
    Agent,
    ListOp,
    PrepareOp,
    ResolverConfigCase,
    StoreCase,
    StoreSession,
    batched,
    config_cases,
    store_cases,
    user_message,
)

_NOT_FOUND = re.compile(r'failed to read referenced session: session "(.*)" not found', re.DOTALL)


@pytest.fixture(scope="module")
def empty_root() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="dsh-sr-empty-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@conformance_settings(ci_examples=20)
@given(batched(config_cases(), 10))
def test_resolver_config_validation(oracle: Oracle, empty_root: Path, cases: list[dict[str, Any]]) -> None:
    upstream = oracle.batch([("config", {"config": case}) for case in cases])
    for case, answer in zip(cases, upstream, strict=True):
        py.assert_same(py.config(empty_root, case), answer, {"config": case})
    oracle.count(len(cases))


def digest(root: Path) -> list[list[str]]:
    """The oracle's tree digest, computed here: relative path and SHA-256 of every file."""
    return sorted(
        [str(path.relative_to(root)), hashlib.sha256(path.read_bytes()).hexdigest()]
        for path in root.rglob("*")
        if path.is_file()
    )


def missing_ids(case: StoreCase, op: PrepareOp) -> set[str]:
    """The referenced ids no log holds, as JS strings (a surrogate pair is the character it spells,
    as upstream's message names it)."""
    on_disk = {s.session_id for s in case.sessions if s.events}
    return {
        js_normalize(r["sessionId"])
        for r in op.references
        if isinstance(r, dict) and isinstance(r.get("sessionId"), str) and r["sessionId"] not in on_disk
    }


def same_race(a: Outcome, b: Outcome, case: StoreCase, op: Any) -> bool:
    """With two or more missing ids, upstream's READ_FAILED names whichever read failed
    first (a race on a real store), so any missing id is an acceptable answer."""
    if not isinstance(op, PrepareOp) or a.ok or b.ok or a.error is None or b.error is None:
        return False
    missing = missing_ids(case, op)
    if len(missing) < 2:
        return False
    named = [_NOT_FOUND.fullmatch(e["message"]) for e in (a.error, b.error)]
    return all(
        e["code"] == "SESSION_REFERENCE_READ_FAILED" and m is not None and m.group(1) in missing
        for e, m in zip((a.error, b.error), named, strict=True)
    )


def compare(python: Outcome, upstream: Outcome, case: StoreCase, op: Any, what: str) -> None:
    if same_race(python, upstream, case, op):
        return
    py.assert_same(python, upstream, {"what": what, "op": op.oracle_spec(), "store": case})


@zstd
@conformance_settings(ci_examples=150)
@given(store_cases())
def test_list_candidates_and_prepare_over_upstream_written_stores(oracle: Oracle, case: StoreCase) -> None:
    root = Path(tempfile.mkdtemp(prefix="dsh-sr-store-"))
    try:
        reply = oracle.require(
            "store_case",
            root=str(root),
            compression=case.compression,
            packChunks=case.pack_chunks,
            sessions=[s.oracle_spec() for s in case.sessions],
            config=case.config.oracle_spec(),
            ops=[op.oracle_spec() for op in case.ops],
        )
        assert reply["rootUnchanged"], "upstream's read changed the root"
        assert digest(root) == reply["files"]
        written = {s.session_id for s in case.sessions if s.events}
        assert len(reply["files"]) == len(written), "upstream writes one log per non-empty session"
        memory = [py.upstream_op_outcome(op, r) for op, r in zip(case.ops, reply["memory"], strict=True)]
        disk = [py.upstream_op_outcome(op, r) for op, r in zip(case.ops, reply["disk"], strict=True)]
        if case.memory_matches_disk:
            for op, in_memory, on_disk in zip(case.ops, memory, disk, strict=True):
                compare(in_memory, on_disk, case, op, "upstream in memory vs upstream on disk")

        python = py.run_store_ops(root, case)
        assert digest(root) == reply["files"], "the Python store changed the root"
        for op, mine, theirs in zip(case.ops, python, disk, strict=True):
            compare(mine, theirs, case, op, "python on disk vs upstream on disk")
        oracle.count(len(case.ops))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_id_spelled_as_a_split_surrogate_pair_is_the_same_js_string(oracle: Oracle) -> None:
    """In JS, "\\ud83d" + "\\ude00" IS "😀" (UTF-16), so upstream finds the session and
    excludes the agent itself whichever way a caller spells the id; Python strings keep
    the two code points apart unless the resolver joins them (``jsjson.js_normalize``)."""
    source = StoreSession("😀", None, 1, [_user_message("hello")])
    case = StoreCase(
        sessions=[StoreSession("target", None, 2, [_user_message("hi")]), source],
        compression="none",
        pack_chunks=False,
        config=ResolverConfigCase(3, 50, 65536),
        ops=[
            PrepareOp(
                Agent("target", None), [{"type": "text", "text": "x"}], [{"sessionId": "\ud83d\ude00"}], False
            ),
            PrepareOp(
                Agent("\ud83d\ude00", None), [{"type": "text", "text": "x"}], [{"sessionId": "😀"}], False
            ),
            ListOp(Agent("\ud83d\ude00", None), None, OMIT),
        ],
    )
    root = Path(tempfile.mkdtemp(prefix="dsh-sr-split-"))
    try:
        reply = oracle.require(
            "store_case",
            root=str(root),
            compression=case.compression,
            packChunks=case.pack_chunks,
            sessions=[s.oracle_spec() for s in case.sessions],
            config=case.config.oracle_spec(),
            ops=[op.oracle_spec() for op in case.ops],
        )
        disk = [py.upstream_op_outcome(op, r) for op, r in zip(case.ops, reply["disk"], strict=True)]
        assert disk[0].ok and disk[2].ok and [c["sessionId"] for c in disk[2].result] == ["target"]
        assert disk[1].error is not None and disk[1].error["code"] == "SESSION_REFERENCE_SELF_REFERENCE"
        for op, mine, theirs in zip(case.ops, py.run_store_ops(root, case), disk, strict=True):
            compare(mine, theirs, case, op, "split surrogate pair")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _user_message(text: str) -> dict[str, Any]:
    data = user_message(f"m-{text}", [{"type": "text", "text": text}], {"kind": "user"})
    return {"type": "user/message", "data": data, "surfaceOp": "append"}
