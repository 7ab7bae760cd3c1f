"""UTF-16 positions, LSP line breaks, and incremental document edits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types

from dsh_session_reference.lines import code_units
from dsh_session_reference.lsp.documents import DocumentStore
from dsh_session_reference.lsp.positions import LineIndex, encoding_of


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def test_utf16_counts_astral_characters_twice() -> None:
    text = "a😀b\n€x"
    index = LineIndex(text)
    assert index.position_at(text.index("b")) == pos(0, 3)
    assert index.offset_at(pos(0, 3)) == text.index("b")
    assert index.position_at(text.index("x")) == pos(1, 1)
    assert index.position_at(text.index("x"), "utf-8") == pos(1, 3)
    assert index.position_at(text.index("b"), "utf-32") == pos(0, 2)
    assert index.offset_at(pos(0, 5), "utf-8") == text.index("b")


def test_a_position_inside_a_surrogate_pair_rounds_down() -> None:
    index = LineIndex("a😀b")
    assert index.offset_at(pos(0, 2)) == 1
    assert index.offset_at(pos(0, 3)) == 2


def test_only_lsp_line_breaks_split_lines() -> None:
    text = "one\u2028still one\x0bsame\r\ntwo\rthree\nfour"
    index = LineIndex(text)
    assert index.line_count == 4
    assert index.offset_at(pos(1, 0)) == text.index("two")
    assert index.offset_at(pos(2, 0)) == text.index("three")
    assert index.position_at(text.index("same")) == pos(0, text.index("same"))


def test_positions_clamp_to_line_and_text_ends() -> None:
    text = "ab\r\ncd"
    index = LineIndex(text)
    assert index.offset_at(pos(0, 99)) == 2  # before the \r\n, not inside it
    assert index.offset_at(pos(9, 0)) == len(text)
    assert index.position_at(10_000) == pos(1, 2)


def test_lone_surrogates_are_one_utf16_unit() -> None:
    assert code_units("\ud800x", "utf-16") == 2
    assert code_units("😀", "utf-16") == 2
    assert code_units("😀", "utf-8") == 4


def test_encoding_of_defaults_to_utf16() -> None:
    assert encoding_of(None) == "utf-16"
    assert encoding_of(types.PositionEncodingKind.Utf32) == "utf-32"
    assert encoding_of("utf-8") == "utf-8"


@given(st.text(alphabet=st.sampled_from(["a", "😀", "\n", "\r", "\u2028", "é"]), max_size=40))
def test_offset_position_round_trip(text: str) -> None:
    index = LineIndex(text)
    for offset in range(len(text) + 1):
        if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
            continue  # inside a \r\n break: not a position an editor can express
        for encoding in ("utf-16", "utf-8", "utf-32"):
            assert index.offset_at(index.position_at(offset, encoding), encoding) == offset


def test_incremental_changes_apply_by_utf16_range() -> None:
    store = DocumentStore()
    store.open(
        types.TextDocumentItem(uri="file:///a.md", language_id="markdown", version=1, text="😀 @x\u2028y\nz")
    )
    change = types.TextDocumentContentChangePartial(
        range=types.Range(start=pos(0, 3), end=pos(0, 5)), text="@abc"
    )
    document = store.change("file:///a.md", 2, [change], "utf-16")
    assert document is not None
    assert document.text == "😀 @abc\u2028y\nz"
    assert document.version == 2
    second = types.TextDocumentContentChangePartial(
        range=types.Range(start=pos(1, 0), end=pos(1, 1)), text="Z"
    )
    full = types.TextDocumentContentChangeWholeDocument(text="replaced")
    document = store.change("file:///a.md", 3, [second], "utf-16")
    assert document is not None and document.text.endswith("\nZ")
    document = store.change("file:///a.md", 4, [full], "utf-16")
    assert document is not None and document.text == "replaced"
    assert store.change("file:///missing.md", 1, [full], "utf-16") is None
    assert store.close("file:///a.md") is document
    assert store.get("file:///a.md") is None


def test_documents_are_stored_js_normalized() -> None:
    store = DocumentStore()
    document = store.open(
        types.TextDocumentItem(uri="file:///b.md", language_id="markdown", version=1, text="\ud83d\ude00")
    )
    assert document.text == "😀"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8"])
def test_range_of_spans_the_offsets(encoding: str) -> None:
    index = LineIndex("x\n€😀y")
    rng = index.range_of(2, 4, encoding)  # type: ignore[arg-type]
    assert rng.start.line == rng.end.line == 1
    assert index.offset_at(rng.end, encoding) == 4  # type: ignore[arg-type]
