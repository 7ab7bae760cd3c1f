"""Property and fuzz tests of the pure core: the URI and mention grammar, retention and the framing.

Each property is stated as upstream defines the behaviour, so a failure is a
real disagreement, not a changed snapshot. The diagnostics/prepare invariant
(a document has error diagnostics exactly when ``parse`` + ``prepare`` fails)
lives in ``tests/lsp/test_invariant.py`` and follows the same profiles.
"""

from __future__ import annotations

import base64
import itertools
import json
import re

from hypothesis import assume, example, given
from hypothesis import strategies as st

from dsh_session_reference.errors import INVALID_REFERENCE, SessionReferenceError
from dsh_session_reference.jsjson import js_byte_length, js_normalize, js_stringify, js_utf8
from dsh_session_reference.model import SessionRecord, SurfaceSnapshot
from dsh_session_reference.projection import ConversationItem
from dsh_session_reference.retention import retain_items, truncate_with_notice
from dsh_session_reference.snapshot import PROMPT_PREFIX, PROMPT_SUFFIX, build_additional_context
from dsh_session_reference.uri import (
    SESSION_REFERENCE_SCHEME,
    SessionReference,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
    scan_session_references,
)

from .conftest import hardening_settings

SCHEME = SESSION_REFERENCE_SCHEME
LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
HOSTILE_CHARS = [
    "\x00", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\ufeff",
    "<", ">", "&", '"', "'", "\\", "]", "[", ")", "(", "@", "\n", "\r", "\t", " ", "😀", "界", "é",
]  # fmt: skip

# Any JS string: arbitrary text plus lone surrogates and the characters that matter to the grammar.
js_chars = st.one_of(st.characters(), st.sampled_from(LONE_SURROGATES + HOSTILE_CHARS))
js_text = st.text(js_chars, max_size=40)
b64url = st.text(
    st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), max_size=30
)


def _snapshot(session_id: str, cwd: str | None, seq: int | None) -> SurfaceSnapshot:
    """The fixed fields retention serializes: the session's id and cwd, and the seq."""
    return SurfaceSnapshot(SessionRecord(session_id, 0, cwd, {}), seq)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@st.composite
def payload_bytes(draw: st.DrawFn) -> bytes:
    """What a payload may decode to: JSON of any shape, near-miss JSON strings, invalid UTF-8."""
    value = draw(
        st.recursive(
            st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | js_text,
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=5,
        )
    )
    encoded = json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    noise = draw(st.sampled_from([b"", b" ", b"\n", b"\xff", b"\xc3", b'"', b"\\"]))
    where = draw(st.sampled_from(["before", "after", "none"]))
    return noise + encoded if where == "before" else encoded + noise if where == "after" else encoded


uris = st.one_of(
    js_text,
    js_text.map(lambda text: SCHEME + text),
    b64url.map(lambda text: SCHEME + text),
    payload_bytes().map(lambda raw: SCHEME + b64(raw)),
    st.builds(encode_session_reference_uri, js_text).flatmap(
        lambda uri: st.sampled_from([uri, uri + "=", uri + "A", uri[:-1], uri.upper(), " " + uri])
    ),
)


@hardening_settings(400)
@given(uris)
@example("dsh-session:IiJ")
@example("dsh-session:" + "A" * 100_000)
@example("dsh-session:Ilx1ZDgwMCI")
def test_decode_raises_only_session_reference_errors(uri: str) -> None:
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError as error:
        assert error.code == INVALID_REFERENCE
        assert error.message == f"invalid session reference URI {js_stringify(uri)}"
        return
    assert encode_session_reference_uri(session_id) == uri  # only canonical URIs decode


# Text made of the grammar's own pieces, so mentions (valid, broken and half-glued) are common.
_PIECES = [
    "@[", "](", ")", "]", "[", "\\", "@", "dsh-session:", "dsh-session:IiJ", "dsh-session:MTIz", "%%",
    "dsh-session:ImFiYyI", "dsh-session:ImFiYyI=", "IiI", "\n", "\u2028", " ", "\t", "x", "é",
]  # fmt: skip
mention_soup = st.lists(
    st.one_of(
        st.sampled_from(_PIECES + LONE_SURROGATES + HOSTILE_CHARS),
        js_text,
        st.builds(encode_session_reference_uri, js_text),
        st.builds(format_session_reference_mention, js_text, st.none() | js_text),
        payload_bytes().map(lambda raw: SCHEME + b64(raw)),
    ),
    max_size=12,
).map("".join)


@hardening_settings(400)
@given(mention_soup)
def test_parse_raises_only_session_reference_errors_and_agrees_with_the_scanner(text: str) -> None:
    spans = scan_session_references(text)
    try:
        parsed = parse_session_reference_text(text)
    except SessionReferenceError as error:
        invalid = [span for span in spans if not span.valid]
        assert invalid, "the parser rejected text the scanner found no fault in"
        assert error.code == INVALID_REFERENCE
        assert error.message == f"invalid session reference URI {js_stringify(invalid[0].uri)}"
        return
    assert all(span.valid for span in spans), "the parser accepted a mention the scanner flags"
    assert parsed.references == [SessionReference(span.session_id or "", span.label) for span in spans]
    normalized = js_normalize(text)
    rebuilt, position = [], 0
    for span in spans:
        rebuilt += [normalized[position : span.start], "@" + (span.label or "")]
        position = span.end
    assert parsed.text == "".join([*rebuilt, normalized[position:]])


@hardening_settings(400)
@given(js_text, st.none() | js_text, st.text(st.characters(exclude_characters="@[]\\"), max_size=10))
@example('unicode/引号"/slash\\/line\n', "源]会话", " ")
def test_format_parse_and_encode_decode_round_trip(session_id: str, label: str | None, context: str) -> None:
    uri = encode_session_reference_uri(session_id)
    assert re.fullmatch(r"dsh-session:[A-Za-z0-9_-]+", uri)
    assert decode_session_reference_uri(uri) == js_normalize(session_id)
    shown = js_normalize(session_id if label is None else label)
    text = f"{context} {format_session_reference_mention(session_id, label)} {context}"
    parsed = parse_session_reference_text(text)
    assert parsed.references == [SessionReference(js_normalize(session_id), shown)]
    normalized = js_normalize(context)
    assert parsed.text == f"{normalized} @{shown} {normalized}"
    bare = parse_session_reference_text(f"{context} {uri} {context}")
    assert bare.references == [SessionReference(js_normalize(session_id), js_normalize(session_id))]


NOTICE = re.compile(r"\n\[… omitted (\d+) UTF-8 bytes …\]\Z")


def _assert_head_tail_of(original: str, kept: str) -> int:
    """``kept`` is a prefix plus a suffix of ``original``'s UTF-8, each cut at a character boundary;
    returns how many bytes were left out."""
    whole = js_utf8(original)
    part = js_utf8(kept)
    for cut in range(len(part) + 1):
        head, tail = part[:cut], part[cut:]
        if whole.startswith(head) and whole.endswith(tail) and len(part) <= len(whole):
            try:  # strict: a split sequence would not decode
                head.decode("utf-8")
                tail.decode("utf-8")
            except UnicodeDecodeError:
                continue
            return len(whole) - len(part)
    raise AssertionError(f"{kept!r} is not a head and tail of {original!r}, cut at character boundaries")


@hardening_settings(400)
@given(js_text.flatmap(lambda t: st.sampled_from([t, t * 20, t * 200])), st.integers(0, 400))
@example("a€€b", 2)
@example("界" * 400, 36)
def test_truncation_fits_never_splits_utf8_and_counts_the_omission(text: str, budget: int) -> None:
    result = truncate_with_notice(text, budget)
    total = js_byte_length(text)
    assert js_byte_length(result.text) <= budget or total <= budget
    if total <= budget:
        assert (result.text, result.omitted_bytes) == (text, 0)
        return
    notice = NOTICE.search(result.text)
    if notice is None:  # not even the notice fits: nothing is kept
        assert (result.text, result.omitted_bytes) == ("", total)
        return
    assert int(notice.group(1)) == result.omitted_bytes
    assert _assert_head_tail_of(text, result.text[: notice.start()]) == result.omitted_bytes


@st.composite
def conversations(draw: st.DrawFn) -> list[ConversationItem]:
    texts = draw(
        st.lists(
            js_text.filter(bool).flatmap(lambda t: st.sampled_from([t, t * 30])), max_size=6, unique=True
        )
    )
    items = []
    for text in texts:
        role = draw(st.sampled_from(["user", "assistant"]))
        items.append(ConversationItem(role, text, role == "user" and draw(st.booleans()), text))  # type: ignore[arg-type]
    return items


def _shortened_from(original: str, text: str) -> int | None:
    """The bytes a retained text leaves out of its original, ``None`` if it is not derived from it."""
    if text == original:
        return 0
    notice = NOTICE.search(text)
    if notice is None:
        return js_byte_length(original) if text == "" else None
    try:
        omitted = _assert_head_tail_of(original, text[: notice.start()])
    except AssertionError:
        return None
    return omitted if omitted == int(notice.group(1)) else None


@hardening_settings(300)
@given(
    conversations(),
    js_text,
    js_text,
    st.none() | js_text,
    st.none() | st.integers(0, 10**6),
    st.integers(1, 3000),
)
def test_retention_never_exceeds_the_budget_and_accounts_for_every_byte(
    items: list[ConversationItem], session_id: str, label: str, cwd: str | None, seq: int | None, budget: int
) -> None:
    originals: list[tuple[str, str, bool]] = []
    for item in items:
        assert isinstance(item.text, str)  # the strategy builds whole texts
        originals.append((item.role, item.text, item.checkpoint))
    retained = retain_items(items, _snapshot(session_id, cwd, seq), label, budget)
    if retained is None:  # BUDGET_EXCEEDED: the fixed fields, or unshrinkable text, cannot fit
        return
    assert retained.serialized_bytes <= budget
    stats = retained.stats
    conversation = retained.data["conversation"]
    assert (stats.original_messages, stats.retained_messages) == (len(items), len(conversation))
    assert stats.retained_messages + stats.omitted_messages == len(items)
    assert stats.truncated == (stats.omitted_messages > 0 or stats.omitted_bytes > 0)
    # Some order-preserving assignment of survivors to originals explains every byte, drops no
    # checkpoint and keeps the newest message.
    explained: list[int] = []
    for chosen in itertools.combinations(range(len(originals)), len(conversation)):
        pairs = list(zip(chosen, conversation, strict=True))
        omitted = [_shortened_from(originals[i][1], entry["text"]) for i, entry in pairs]
        if any(o is None for o in omitted) or any(originals[i][0] != entry["role"] for i, entry in pairs):
            continue
        dropped = set(range(len(originals))) - set(chosen)
        if any(originals[i][2] for i in dropped) or (originals and len(originals) - 1 in dropped):
            continue
        total = sum(o for o in omitted if o is not None) + sum(
            js_byte_length(originals[i][1]) for i in dropped
        )
        explained.append(total)
    assert stats.omitted_bytes in explained


FRAMING = st.sampled_from(
    ["</referenced-sessions>", "<referenced-sessions>", "<", "\\u003c", "\\", "<!--", "<\u0000", "<\ud800"]
)
hostile_text = st.lists(st.one_of(FRAMING, js_text), max_size=6).map("".join)


@hardening_settings(300)
@given(
    st.lists(
        st.tuples(hostile_text, hostile_text, st.none() | hostile_text, st.lists(hostile_text, max_size=4)),
        min_size=1,
        max_size=3,
    ),
    st.integers(60, 2000),
)
def test_the_snapshot_data_region_never_contains_a_literal_lt(
    sources: list[tuple[str, str, str | None, list[str]]], budget: int
) -> None:
    rendered = []
    for session_id, label, cwd, texts in sources:
        items = [ConversationItem("user", text, False, text) for text in texts if text]
        retained = retain_items(items, _snapshot(session_id, cwd, 7), label, budget)
        assume(retained is not None)
        assert retained is not None
        rendered.append(retained)
    prompt = build_additional_context(rendered).text
    assert prompt.startswith(PROMPT_PREFIX) and prompt.endswith(PROMPT_SUFFIX)
    data = prompt[len(PROMPT_PREFIX) : len(prompt) - len(PROMPT_SUFFIX)]
    assert "<" not in data and "\n" not in data
    assert prompt.count("<referenced-sessions>") == 1 and prompt.count("</referenced-sessions>") == 1
    assert js_stringify(json.loads(data)) == js_stringify([source.data for source in rendered])
