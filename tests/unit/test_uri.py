"""URI, mention and parser rules, checked against the vectors produced by the published package."""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_reference.errors import SessionReferenceError
from dsh_session_reference.uri import (
    JS_TRIMMED,
    MENTION_PATTERN,
    decode_session_reference_uri,
    encode_session_reference_uri,
    find_mentions,
    format_session_reference_mention,
    parse_prompt_text,
    parse_session_reference_text,
    scan_session_references,
)
from vectors import URI_VECTORS, U


@pytest.mark.parametrize(("session_id", "uri"), URI_VECTORS)
def test_encode_and_decode_round_trip(session_id: str, uri: str) -> None:
    assert encode_session_reference_uri(session_id) == uri
    assert decode_session_reference_uri(uri) == session_id


@pytest.mark.parametrize(
    "uri",
    [
        "dsh-session:IiJ",
        "dsh-session:IiI=",
        "dsh-session:abc",
        "dsh-session:MTIz",
        "https://example.test",
        "dsh-session:",
        "dsh-session:eyJpZCI6IngifQ",
    ],
)
def test_decode_rejects_with_upstream_message(uri: str) -> None:
    with pytest.raises(SessionReferenceError) as caught:
        decode_session_reference_uri(uri)
    assert caught.value.code == "SESSION_REFERENCE_INVALID_REFERENCE"
    assert caught.value.message == 'invalid session reference URI "' + uri + '"'


def test_format_escapes_only_backslash_and_bracket() -> None:
    assert format_session_reference_mention("abc", "a]b\\c)d[e") == "@[a\\]b\\\\c)d[e](dsh-session:ImFiYyI)"
    assert format_session_reference_mention("a]b") == "@[a\\]b](dsh-session:ImFdYiI)"
    assert format_session_reference_mention("abc", "") == "@[](dsh-session:ImFiYyI)"
    assert format_session_reference_mention("source]", "source]") == "@[source\\]](dsh-session:InNvdXJjZV0i)"


PARSE_VECTORS = [
    (
        format_session_reference_mention("abc", "a]b\\c)d[e") + " tail",
        "@a]b\\c)d[e tail",
        [("abc", "a]b\\c)d[e")],
    ),
    (f"see {U}.", "see @abc.", [("abc", "abc")]),
    ("see dsh-session:IiI=", "see @=", [("", "")]),
    ("dsh-session: and dsh-session:%%", "dsh-session: and dsh-session:%%", []),
    (f"@[lab]({U}", "@[lab](@abc", [("abc", "abc")]),
    (f"@[x](https://e.test) [y]({U})", "@[x](https://e.test) [y](@abc)", [("abc", "abc")]),
    (f"@[a\nb]({U})", "@a\nb", [("abc", "a\nb")]),
    (f"@[a\\\nb]({U})", "@[a\\\nb](@abc)", [("abc", "abc")]),
    (f"@[a\\xb\\\\]({U})", "@axb\\", [("abc", "axb\\")]),
    (f"@[]({U})", "@", [("abc", "")]),
    (f"@[x]({U} )", "@[x](@abc )", [("abc", "abc")]),
    ("DSH-SESSION:ImFiYyI", "DSH-SESSION:ImFiYyI", []),
    (f"{U} {U}", "@abc @abc", [("abc", "abc"), ("abc", "abc")]),
    (f"@[$&$1]({U})", "@$&$1", [("abc", "$&$1")]),
    ("what is a dsh-session: URI?", "what is a dsh-session: URI?", []),
    ("see dsh-session:%%%", "see dsh-session:%%%", []),
    # JS `.` stops at U+2028 too, so this backslash cannot escape it: the Markdown form fails.
    (f"@[a\\\u2028b]({U})", "@[a\\\u2028b](@abc)", [("abc", "abc")]),
]


@pytest.mark.parametrize(("text", "rendered", "refs"), PARSE_VECTORS)
def test_parse_vectors(text: str, rendered: str, refs: list[tuple[str, str]]) -> None:
    parsed = parse_session_reference_text(text)
    assert parsed.text == rendered
    assert [(r.session_id, r.label) for r in parsed.references] == refs


@pytest.mark.parametrize(
    "text",
    [
        "@[x](dsh-session:IiI=)",
        "@[x](dsh-session:)",
        "[link](dsh-session:Zm9v",
        f"@[x]({U}!)",
        f"x{U}y",
        "see dsh-session:IiJ",
        "@[bad](dsh-session:%%%)",
        "@[bad](dsh-session:not-canonical)",
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(SessionReferenceError) as caught:
        parse_session_reference_text(text)
    assert caught.value.code == "SESSION_REFERENCE_INVALID_REFERENCE"
    assert caught.value.message.startswith("invalid session reference URI ")


def test_round_trip_arbitrary_id_from_upstream_spec() -> None:
    sid = 'unicode/引号"/slash\\/line\n'
    bare = encode_session_reference_uri(sid)
    parsed = parse_session_reference_text(
        "compare " + format_session_reference_mention(sid, "源]会话") + " and " + bare + "."
    )
    assert parsed.text == f"compare @源]会话 and @{sid}."
    assert [(r.session_id, r.label) for r in parsed.references] == [(sid, "源]会话"), (sid, sid)]


def test_js_whitespace_ends_a_markdown_uri_but_python_only_space_does_not() -> None:
    # \x1c is whitespace for Python's \s but not for JS: it stays inside the URI group and fails it.
    with pytest.raises(SessionReferenceError):
        parse_session_reference_text(f"@[x]({U}\x1c)")
    # \ufeff is JS whitespace: the Markdown form fails at it and the bare URI is read.
    assert parse_session_reference_text(f"@[x]({U}\ufeff)").text == "@[x](@abc\ufeff)"


class TestScanner:
    def test_agrees_with_parser_on_validity(self) -> None:
        for text, _, refs in PARSE_VECTORS:
            spans = scan_session_references(text)
            assert all(s.valid for s in spans)
            assert [(s.session_id, s.label) for s in spans] == refs

    def test_noncanonical_is_recovered(self) -> None:
        (span,) = scan_session_references("see dsh-session:IiJ")
        assert span.problem == "noncanonical"
        assert span.canonical_uri == "dsh-session:IiI"
        assert span.recovered_id == ""

    def test_glued_bare_uri_recovers_the_id_and_keeps_the_word(self) -> None:
        text = f"x{U}yz"
        (span,) = scan_session_references(text)
        assert span.problem == "malformed"
        assert span.recovered_id == "abc"
        assert text[span.uri_start : span.uri_replace_end] == U
        assert text[span.uri_replace_end : span.end] == "yz"

    def test_padding_and_junk_in_markdown(self) -> None:
        (padded,) = scan_session_references("@[x](dsh-session:IiI=)")
        assert (padded.problem, padded.canonical_uri) == ("malformed", "dsh-session:IiI")
        (junk,) = scan_session_references(f"@[x]({U}!)")
        assert (junk.problem, junk.recovered_id) == ("malformed", "abc")

    def test_unrecoverable_kinds(self) -> None:
        (empty,) = scan_session_references("@[x](dsh-session:)")
        assert (empty.problem, empty.canonical_uri) == ("empty", None)
        (number,) = scan_session_references("see dsh-session:MTIz")
        assert (number.problem, number.canonical_uri) == ("not-a-string", None)
        (junk,) = scan_session_references("@[x](dsh-session:%%%)")
        assert (junk.problem, junk.canonical_uri) == ("malformed", None)

    def test_offsets_cover_the_match(self) -> None:
        text = "a " + format_session_reference_mention("abc", "L") + " b"
        (span,) = scan_session_references(text)
        assert text[span.start : span.end] == format_session_reference_mention("abc", "L")
        assert text[span.uri_start : span.uri_replace_end] == U

    def test_huge_payload_is_bounded(self) -> None:
        text = "dsh-session:" + "A" * 1_000_000
        (span,) = scan_session_references(text)
        assert span.problem == "malformed"


# --- the scanner finds upstream's matches in linear time ------------------------------------------

_PIECES = [
    "@[",
    "@",
    "[",
    "]",
    "](",
    "(",
    ")",
    "\\",
    "\\]",
    "\\\\",
    "\n",
    "\r",
    "\u2028",
    " ",
    "\t",
    "a",
    "é",
    "dsh-session:",
    "dsh-session:IiI",
    "IiJ",
    "x_-",
    "](dsh-session:",
    "](dsh-session:ImEi)",
]


def _by_regex(text: str) -> list[tuple[int, int, str | None, str, int]]:
    found = []
    for match in MENTION_PATTERN.finditer(text):
        group = 2 if match.group(2) is not None else 3
        found.append((match.start(), match.end(), match.group(1), match.group(group), match.start(group)))
    return found


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_find_mentions_is_upstreams_pattern(text: str) -> None:
    """``find_mentions`` is ``MENTION_PATTERN.finditer`` (the regex the differential suite holds
    against upstream), match for match, on texts dense in the pattern's own punctuation."""
    found = [(m.start, m.end, m.raw_label, m.uri, m.uri_start) for m in find_mentions(text)]
    assert found == _by_regex(text)


@pytest.mark.parametrize(
    "text",
    [
        "@[" * 200_000,  # the regex: 40,000 of them took 85 s
        "@[" + "\\a" * 200_000 + "\\\n" + "@[" * 100_000,
        ("@[" + "dsh-session:" * 3) * 50_000,
        "@[x](dsh-session:" + "A" * 400_000,
    ],
    ids=["unclosed labels", "escapes then a stray backslash", "bare inside labels", "unclosed uri"],
)
def test_the_scan_is_linear_on_shapes_that_make_the_regex_quadratic(text: str) -> None:
    """Each shape is scanned in well under a second (the regex, scanning again from every ``@[``,
    takes minutes to hours on them); the parser and the lenient scanner use the same scan."""
    started = time.monotonic()
    spans = scan_session_references(text)
    with contextlib.suppress(SessionReferenceError):  # the first invalid mention stops the parser
        parse_session_reference_text(text)
    assert time.monotonic() - started < 5
    assert all(not span.valid for span in spans) or spans == []


# --- a prompt's text as dsh's composer sends it ---------------------------------------------------


def test_a_prompt_is_parsed_as_the_composer_sends_it() -> None:
    """dsh web's composer sends ``draft.trim()``: a file's final newline (and any whitespace around
    the message) never reaches the model; whitespace inside stays."""
    mention = format_session_reference_mention("s1", "Alpha")
    parsed = parse_prompt_text(f"\n\n  Look at {mention}\n\tplease \u3000\n\n")
    assert parsed.text == "Look at @Alpha\n\tplease"
    assert [r.session_id for r in parsed.references] == ["s1"]
    assert parse_session_reference_text(f"{mention}\n").text == "@Alpha\n"  # upstream's parse keeps it
    assert parse_prompt_text("\n \n").text == ""


def test_the_composer_trims_before_the_host_parses() -> None:
    """A label ending in a space, last in the message: the composer trims the written-out mention
    (its ``)`` ends the text), so the readable text keeps the label's space."""
    mention = format_session_reference_mention("s1", "Alpha ")
    assert parse_prompt_text(f"see {mention}\n").text == "see @Alpha "


def test_the_trimmed_set_is_javascripts_whitespace_and_line_terminators() -> None:
    """ECMAScript's WhiteSpace (TAB VT FF SP NBSP ZWNBSP and Zs) and LineTerminator (LF CR LS PS);
    not Python's ``str.isspace`` (U+001C..U+001F and U+0085 are not trimmed by JS). The set is
    checked against Node's own ``String.prototype.trim`` in ``tests/dsh/test_composer_trim.py``."""
    assert set(JS_TRIMMED) == {
        "\t", "\n", "\x0b", "\x0c", "\r", " ", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B)),
        "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
    }  # fmt: skip
    assert parse_prompt_text("\x1c\x85x\x85\x1f").text == "\x1c\x85x\x85\x1f"
