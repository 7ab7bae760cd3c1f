"""The Python port driven with the same inputs the oracle gets, answering in upstream's shapes.

Each adapter returns what upstream returns over the JSON boundary (camelCase
keys, ``null`` for ``undefined`` results, errors as ``{name, code, message}``),
so a comparison is one equality check of two JSON values.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dsh_session_reference
from dsh_session_reference import (
    AgentRef,
    SessionReference,
    SessionReferenceError,
    SessionReferenceResolver,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)
from dsh_session_reference.jsjson import js_normalize, js_stringify, stringify_tag_safe_json
from dsh_session_reference.model import SessionRecord, SurfaceSnapshot
from dsh_session_reference.retention import retain_referenced_session

from .conftest import Outcome
from .strategies import OMIT, ListOp, PrepareOp, SnapshotCase, StoreCase


def error_shape(error: BaseException) -> dict[str, Any]:
    if isinstance(error, SessionReferenceError):
        return {"name": error.name, "code": error.code, "message": error.message}
    return {"name": type(error).__name__, "code": None, "message": str(error)}


def attempt(work: Callable[[], Any]) -> Outcome:
    """Run one Python call; any exception becomes an error outcome to compare with upstream's."""
    try:
        return Outcome(True, work())
    except Exception as error:
        return Outcome(False, error=error_shape(error))


def js_equivalent(value: Any) -> Any:
    """Strings as JS sees them: a high and a low surrogate code point side by side are one
    astral character in UTF-16, so both sides' strings are compared after joining such pairs."""
    if isinstance(value, str):
        return js_normalize(value)
    if isinstance(value, list):
        return [js_equivalent(item) for item in value]
    if isinstance(value, dict):
        return {js_normalize(key): js_equivalent(item) for key, item in value.items()}
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def show(value: Any) -> str:
    """Readable JSON for a failure report: characters as they are, except that surrogate
    code points (lone, or a split pair) are written as ``\\udXXX`` so they stay visible."""
    text = json.dumps(value, ensure_ascii=False, indent=1, default=repr)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def assert_same(python: Outcome, upstream: Outcome, case: Any) -> None:
    """Identical results, or identical error name, code and message; key order included."""
    raw_py = {"ok": python.ok, "result": python.result, "error": python.error}
    raw_up = {"ok": upstream.ok, "result": upstream.result, "error": upstream.error}
    py, up = js_equivalent(raw_py), js_equivalent(raw_up)
    if py != up or js_stringify(py) != js_stringify(up):
        raise AssertionError(
            "Python differs from upstream\n"
            f"input:    {show(case)}\n"
            f"python:   {show(raw_py)}\n"
            f"upstream: {show(raw_up)}"
        )


# ---------------------------------------------------------------- pure API


def encode(session_id: str) -> Outcome:
    return attempt(lambda: encode_session_reference_uri(session_id))


def decode(uri: str) -> Outcome:
    return attempt(lambda: decode_session_reference_uri(uri))


def format_mention(session_id: str, label: str | None) -> Outcome:
    return attempt(lambda: format_session_reference_mention(session_id, label))


def format_args(session_id: str, label: str | None) -> dict[str, Any]:
    reference: dict[str, Any] = {"sessionId": session_id}
    if label is not None:
        reference["label"] = label
    return {"reference": reference}


def parse(text: str) -> Outcome:
    def run() -> dict[str, Any]:
        parsed = parse_session_reference_text(text)
        return {
            "text": parsed.text,
            "references": [{"sessionId": r.session_id, "label": r.label} for r in parsed.references],
        }

    return attempt(run)


def tag_safe(value: Any) -> Outcome:
    return attempt(lambda: stringify_tag_safe_json(value))


def snapshot_of(case: SnapshotCase) -> SurfaceSnapshot:
    header: dict[str, Any] = {"version": 0, "id": case.session_id, "createdAt": 0}
    if case.cwd is not None:
        header["cwd"] = case.cwd
    record = SessionRecord(id=case.session_id, created_at=0, cwd=case.cwd, header=header)
    return SurfaceSnapshot(session=record, captured_through_seq=case.captured_through_seq, events=case.events)


def retain(case: SnapshotCase) -> Outcome:
    def run() -> Any:
        retained = retain_referenced_session(snapshot_of(case), case.label, case.max_bytes)
        if retained is None:
            return None
        return {"data": retained.data, "stats": retained.stats.to_json()}

    return attempt(run)


# ---------------------------------------------------------------- resolver


def config(root: Path, values: dict[str, Any]) -> Outcome:
    def run() -> dict[str, Any]:
        resolver = SessionReferenceResolver(
            dsh_session_reference.JsonlSessionStore(root),
            max_references=values.get("maxReferences"),
            candidate_limit=values.get("candidateLimit"),
            max_reference_bytes=values.get("maxReferenceBytes"),
        )
        return {
            "maxReferences": resolver.config.max_references,
            "candidateLimit": resolver.config.candidate_limit,
            "maxReferenceBytes": resolver.config.max_reference_bytes,
        }

    return attempt(run)


def python_reference(reference: Any, as_object: bool) -> Any:
    """Well-formed dict references optionally go in as ``SessionReference`` objects."""
    if (
        as_object
        and isinstance(reference, dict)
        and isinstance(reference.get("sessionId"), str)
        and set(reference) <= {"sessionId", "label"}
        and isinstance(reference.get("label", ""), str)
    ):
        return SessionReference(reference["sessionId"], reference.get("label"))
    return reference


@dataclass(frozen=True)
class PreparedView:
    """The comparable part of ``prepare``'s result (the context message id is random)."""

    @staticmethod
    def of_upstream(result: dict[str, Any]) -> dict[str, Any]:
        context = result["additionalContext"]
        if result["hasAdditionalContext"]:
            assert context is not None
            assert context["keys"] == ["source", "content", "role", "id"], context["keys"]
            assert context["role"] == "user" and context["contentLength"] == 1
            context = {"source": context["source"], "text": context["text"]}
        else:
            assert context is None
        return {"content": result["content"], "additionalContext": context}


async def _run_ops(resolver: SessionReferenceResolver, ops: list[ListOp | PrepareOp]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for op in ops:
        agent = AgentRef(op.agent.id, op.agent.cwd)
        try:
            if isinstance(op, ListOp):
                kwargs: dict[str, Any] = {}
                if op.query is not None:
                    kwargs["query"] = op.query
                if op.limit is not OMIT:
                    kwargs["limit"] = op.limit
                candidates = await resolver.list_candidates(agent, **kwargs)
                if op.remote:
                    outcomes.append(
                        Outcome(True, [{**c.to_json(), "mention": c.mention} for c in candidates])
                    )
                else:
                    outcomes.append(Outcome(True, [c.to_json() for c in candidates]))
            else:
                references = [python_reference(r, op.as_objects) for r in op.references]
                prepared = await resolver.prepare(agent, op.content, references)
                context = prepared.additional_context
                if context is not None:
                    assert list(context.to_json()) == ["source", "content", "role", "id"]
                outcomes.append(
                    Outcome(
                        True,
                        {
                            "content": prepared.content,
                            "additionalContext": None
                            if context is None
                            else {"source": context.source, "text": context.text},
                        },
                    )
                )
        except Exception as error:
            outcomes.append(Outcome(False, error=error_shape(error)))
    return outcomes


def run_store_ops(root: Path, case: StoreCase) -> list[Outcome]:
    """The case's calls through ``JsonlSessionStore`` over the root upstream wrote."""
    resolver = SessionReferenceResolver(
        dsh_session_reference.JsonlSessionStore(root),
        max_references=case.config.max_references,
        candidate_limit=case.config.candidate_limit,
        max_reference_bytes=case.config.max_reference_bytes,
    )
    return asyncio.run(_run_ops(resolver, case.ops))


def upstream_op_outcome(op: ListOp | PrepareOp, reply: dict[str, Any]) -> Outcome:
    outcome = Outcome.of(reply)
    if outcome.ok and isinstance(op, PrepareOp):
        return Outcome(True, PreparedView.of_upstream(outcome.result))
    return outcome
