"""``Lines``: a text kept in pieces, edited in time proportional to the edit, read exactly as the
whole string would be (held against a plain rescan of the string after every edit)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_reference import lines as lines_module
from dsh_session_reference.jsjson import js_normalize
from dsh_session_reference.lines import Encoding, Lines, code_units

ALPHABET = ["a", "b", "é", "😀", "\n", "\r", "\r\n", "\u2028", "\ud83d", "\ude00", "\ud800", " "]
ENCODINGS: list[Encoding] = ["utf-16", "utf-8", "utf-32"]


def plain_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in re.finditer(r"\r\n|\r|\n", text))]


def assert_reads_as(lines: Lines, text: str) -> None:
    """Every question :class:`Lines` answers, answered as a rescan of ``text`` would."""
    assert lines.text == text and len(lines) == len(text)
    starts = plain_starts(text)
    assert lines.line_count == len(starts)
    for line, start in enumerate(starts):
        assert lines.line_start(line) == start
        end = starts[line + 1] if line + 1 < len(starts) else len(text)
        if line + 1 < len(starts):
            end -= 2 if text[end - 2 : end] == "\r\n" else 1
        assert lines.line_content_end(line) == end
        for encoding in ENCODINGS:
            width = code_units(text[start:end], encoding)
            for units in (0, 1, width // 2, width, width + 3):
                expected = start + lines_module.chars_in_units(text[start:end], units, encoding)
                assert lines.offset_in(line, units, encoding) == expected
    for offset in range(len(text) + 1):
        line = max(i for i, start in enumerate(starts) if start <= offset)
        for encoding in ENCODINGS:
            assert lines.line_and_units(offset, encoding) == (
                line,
                code_units(text[starts[line] : offset], encoding),
            )
    for a in range(0, len(text) + 1, 3):
        assert lines[a : a + 5] == text[a : a + 5]


edits = st.lists(
    st.tuples(
        st.integers(0, 60), st.integers(0, 8), st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join)
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join), edits)
def test_edits_read_as_the_edited_string(monkeypatch_chunk: None, text: str, changes: list) -> None:
    text = js_normalize(text)
    lines = Lines(text)
    assert_reads_as(lines, text)
    for at, length, new in changes:
        start = min(at, len(text))
        end = min(start + length, len(text))
        before = lines
        lines = lines.edited(start, end, new)
        text = js_normalize(text[:start] + new + text[end:])
        assert_reads_as(lines, text)
        assert before.text != text or before is not lines  # the older text is left as it was
    assert_reads_as(Lines(text), text)


@pytest.fixture
def monkeypatch_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of four characters, so every edit meets piece edges, \\r\\n pairs and surrogates."""
    monkeypatch.setattr(lines_module, "CHUNK", 4)


def test_an_older_lines_keeps_its_text() -> None:
    lines = Lines("one\ntwo\n" * 10_000)
    edited = lines.edited(4, 7, "TWO\nextra")
    assert lines.text == "one\ntwo\n" * 10_000 and lines.line_count == 20_001
    assert edited.text.startswith("one\nTWO\nextra\none") and edited.line_count == 20_002


def test_typing_in_a_big_text_touches_only_the_pieces_edited() -> None:
    """Each keystroke in 25 MB costs what the edit costs: no rescan or copy of the whole text
    (rebuilding the index took 125 ms a keystroke here, the splice and normalization 120 ms more)."""
    line = "some prose words here to make a line of text that is long enough 😀\n"
    lines = Lines(line * (25_000_000 // len(line)))
    started = time.monotonic()
    for number in range(200):
        lines = lines.edited(1_000 + number, 1_000 + number, "x")
        lines.line_and_units(12_000_000)
        lines.offset_in(300_000, 40)
    assert time.monotonic() - started < 2  # measured: about 0.1 s for all 200
    assert lines[1_000:1_200] == "x" * 200
