"""The JSON-lines boundary itself: every string reaches upstream as the same UTF-16
code units that JS would hold for it, and comes back unchanged, lone surrogates
included (JSON.stringify escapes them, ``json.loads`` restores them)."""

from __future__ import annotations

from hypothesis import given

from dsh_session_reference.jsjson import js_normalize

from .conftest import Oracle, conformance_settings
from .strategies import LONE_SURROGATES, batched, js_text


def utf16_units(text: str) -> list[int]:
    raw = js_normalize(text).encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def test_lone_surrogates_and_split_pairs_cross_both_ways(oracle: Oracle) -> None:
    values = [*LONE_SURROGATES, "\ud83d\ude00", "😀", "a\ud800b", "\udc00\ud800", "\x00\u2028"]
    answers = oracle.batch([("echo", {"value": v}) for v in values])
    for value, answer in zip(values, answers, strict=True):
        assert answer.ok, answer.error
        assert answer.result["codeUnits"] == utf16_units(value)
        assert answer.result["value"] == js_normalize(value)
    # A lone surrogate comes back as that one code point, not U+FFFD and not a pair.
    assert answers[0].result["value"] == "\ud800"
    assert answers[6].result["value"] == "😀"


@conformance_settings(ci_examples=8)
@given(batched(js_text(24), 25))
def test_generated_strings_cross_unchanged(oracle: Oracle, values: list[str]) -> None:
    answers = oracle.batch([("echo", {"value": v}) for v in values])
    for value, answer in zip(values, answers, strict=True):
        assert answer.ok, answer.error
        assert answer.result["codeUnits"] == utf16_units(value), repr(value)
        assert answer.result["value"] == js_normalize(value), repr(value)
