"""Generated differential cases for the pure API: URI encode/decode, mention format,
the text parser, tag-safe JSON and the retention loop. Each Hypothesis example is a
batch of cases that the oracle answers in one round trip."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from dsh_session_reference import scan_session_references
from dsh_session_reference.jsjson import js_normalize, js_stringify

from . import python_side as py
from .conftest import Oracle, conformance_settings
from .strategies import (
    SnapshotCase,
    batched,
    decode_inputs,
    encode_uri,
    format_inputs,
    json_values,
    mention_texts,
    session_ids,
    snapshot_cases,
)


def compare_batch(oracle: Oracle, op: str, cases: list[Any], args: Any, python: Any) -> None:
    upstream = oracle.batch([(op, args(case)) for case in cases])
    for case, answer in zip(cases, upstream, strict=True):
        py.assert_same(python(case), answer, {"op": op, "case": case})
    oracle.count(len(cases))


@conformance_settings(ci_examples=20)
@given(batched(session_ids, 25))
def test_encode_and_decode_round_trip(oracle: Oracle, ids: list[str]) -> None:
    compare_batch(oracle, "encode", ids, lambda i: {"id": i}, py.encode)
    uris = [encode_uri(i) for i in ids]
    compare_batch(oracle, "decode", uris, lambda u: {"uri": u}, py.decode)


@conformance_settings(ci_examples=40)
@given(batched(decode_inputs, 25))
def test_decode(oracle: Oracle, uris: list[str]) -> None:
    compare_batch(oracle, "decode", uris, lambda u: {"uri": u}, py.decode)


@conformance_settings(ci_examples=20)
@given(batched(format_inputs, 25))
def test_format_mention(oracle: Oracle, cases: list[tuple[str, str | None]]) -> None:
    compare_batch(
        oracle,
        "format",
        cases,
        lambda c: py.format_args(*c),
        lambda c: py.format_mention(*c),
    )


@conformance_settings(ci_examples=60)
@given(batched(mention_texts, 25))
def test_parse_text(oracle: Oracle, texts: list[str]) -> None:
    compare_batch(oracle, "parse", texts, lambda t: {"text": t}, py.parse)


@conformance_settings(ci_examples=16)
@given(batched(json_values, 25))
def test_stringify_tag_safe_json(oracle: Oracle, values: list[Any]) -> None:
    compare_batch(oracle, "tag_safe", values, lambda v: {"value": v}, py.tag_safe)


@conformance_settings(ci_examples=60)
@given(batched(snapshot_cases(), 12))
def test_retain_referenced_session(oracle: Oracle, cases: list[SnapshotCase]) -> None:
    compare_batch(oracle, "retain", cases, SnapshotCase.oracle_args, py.retain)


@conformance_settings(ci_examples=30)
@given(batched(mention_texts, 25))
def test_lenient_scanner_agrees_with_upstream_parser(oracle: Oracle, texts: list[str]) -> None:
    """The language server's scanner must call valid exactly what upstream's parser accepts,
    find the URI upstream fails on, and offer only quick-fix URIs upstream decodes to the
    recovered id."""
    upstream = oracle.batch([("parse", {"text": text}) for text in texts])
    fixes: list[tuple[str, str | None]] = []
    for text, answer in zip(texts, upstream, strict=True):
        normalized = js_normalize(text)
        spans = scan_session_references(text)
        case = {"text": text, "spans": [repr(span) for span in spans]}
        assert answer.ok == all(span.valid for span in spans), py.show(case)
        if answer.ok:
            found = [{"sessionId": s.session_id, "label": s.label} for s in spans]
            assert py.js_equivalent(found) == py.js_equivalent(answer.result["references"]), py.show(case)
            rebuilt, cursor = [], 0
            for span in spans:
                rebuilt += [normalized[cursor : span.start], "@", span.label or ""]
                cursor = span.end
            rebuilt.append(normalized[cursor:])
            assert js_normalize("".join(rebuilt)) == js_normalize(answer.result["text"]), py.show(case)
        else:
            first = next(span for span in spans if not span.valid)
            assert answer.error is not None
            assert answer.error["message"] == f"invalid session reference URI {js_stringify(first.uri)}", (
                py.show(case)
            )
        fixes += [(s.canonical_uri, s.recovered_id) for s in spans if s.canonical_uri is not None]
    decoded = oracle.batch([("decode", {"uri": uri}) for uri, _ in fixes])
    for (uri, recovered), answer in zip(fixes, decoded, strict=True):
        assert answer.ok and js_normalize(answer.result) == js_normalize(recovered or ""), (
            uri,
            recovered,
            answer,
        )
    oracle.count(len(texts) + len(fixes))
