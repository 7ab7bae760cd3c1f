"""The ``dsh-session:`` URI, the ``@[label](uri)`` mention and the text parser.

Everything here reproduces upstream's ``uri.ts`` exactly, including its regex
semantics under V8's ``u`` flag, which differ from Python's ``re`` in the
meaning of ``.`` and ``\\s``; those classes are spelled out below. The lenient
scanner walks the *same* compiled pattern and judges validity with the *same*
decoder, so the language server's diagnostics cannot disagree with what
``parse_session_reference_text`` (and therefore dsh) accepts.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from .display import display_label
from .errors import SessionReferenceError, invalid_uri
from .jsjson import js_normalize, js_stringify, js_utf8

SESSION_REFERENCE_SCHEME = "dsh-session:"

# V8 `\s` with the `u` flag (ECMAScript WhiteSpace + LineTerminator).
JS_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# The same characters one by one: what ``String.prototype.trim`` removes from either end.
JS_TRIMMED: Final = (
    "\t\n\x0b\x0c\r \xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# V8 `.` without the `s` flag: anything but a line terminator.
_JS_DOT = "[^\n\r\u2028\u2029]"

MENTION_PATTERN = re.compile(
    r"@\[((?:\\" + _JS_DOT + r"|[^\\\]])*)\]\((dsh-session:[^" + JS_SPACE + r")]*)\)"
    r"|(dsh-session:[A-Za-z0-9_-]+)"
)
"""Upstream's pattern, verbatim. :func:`find_mentions` finds exactly its matches without running it
(the tests hold the two against each other)."""
_LABEL_OPEN: Final = "@["
_BARE = re.compile(r"dsh-session:[A-Za-z0-9_-]+")
_LINE_TERMINATORS: Final = frozenset("\n\r\u2028\u2029")
_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")
_UNESCAPE = re.compile(r"\\(" + _JS_DOT + ")")
_ESCAPE = re.compile(r"[\\\]]")


@dataclass(frozen=True)
class SessionReference:
    """One structured reference: the session id and the label shown for it."""

    session_id: str
    label: str | None = None

    def to_json(self) -> dict[str, str]:
        """Upstream's ``{sessionId, label?}`` shape."""
        out = {"sessionId": self.session_id}
        if self.label is not None:
            out["label"] = self.label
        return out


@dataclass(frozen=True)
class ParsedText:
    """``parseSessionReferenceText``'s result: readable text plus references in appearance order."""

    text: str
    references: list[SessionReference]


def encode_session_reference_uri(session_id: str) -> str:
    """``dsh-session:`` + unpadded base64url of ``JSON.stringify(session_id)``."""
    payload = base64.urlsafe_b64encode(js_utf8(js_stringify(session_id))).rstrip(b"=")
    return SESSION_REFERENCE_SCHEME + payload.decode("ascii")


def _decode_payload(payload: str) -> object:
    """Base64url payload -> JSON value, the way V8 reads it (may raise anything)."""
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    # V8 decodes leniently (U+FFFD); strict decoding reaches the same verdict
    # because invalid UTF-8 can never survive the canonical re-encoding check.
    return json.loads(raw.decode("utf-8", "replace"))


_FROM_URLSAFE: Final = str.maketrans("-_", "+/")
_NEEDS_ESCAPE: Final = re.compile(rb'[\x00-\x1f"\\]')


def _plain_id(payload: str) -> str | None:
    """The id a canonical payload spells when its JSON string needs no escape (every id dsh
    makes), without a JSON parse and re-encoding: its bytes are then the id's UTF-8 in quotes,
    and canonical iff the base64 is. ``None``: take the general way (which may refuse it)."""
    standard = payload.translate(_FROM_URLSAFE)  # base64url's alphabet only (checked by the caller)
    try:
        raw = binascii.a2b_base64(standard + "=" * (-len(payload) % 4))
    except binascii.Error:
        return None
    if len(raw) < 2 or raw[0] != 0x22 or raw[-1] != 0x22 or _NEEDS_ESCAPE.search(raw, 1, len(raw) - 1):
        return None
    try:
        text = raw[1:-1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if binascii.b2a_base64(raw, newline=False).rstrip(b"=") != standard.encode("ascii"):
        return None  # stray bits in the last character: not canonical
    return text


def decode_session_reference_uri(uri: str) -> str:
    """Decode a canonical URI; anything else is ``SESSION_REFERENCE_INVALID_REFERENCE``."""
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    if not uri.startswith(SESSION_REFERENCE_SCHEME) or not _PAYLOAD.fullmatch(payload):
        raise invalid_uri(uri)
    plain = _plain_id(payload)
    if plain is not None:
        return plain
    try:
        parsed = _decode_payload(payload)
    except (ValueError, binascii.Error) as error:
        raise invalid_uri(uri, error) from error
    if not isinstance(parsed, str):
        raise invalid_uri(uri, TypeError("decoded session id is not a string"))
    if encode_session_reference_uri(parsed) != uri:
        raise invalid_uri(uri, TypeError("URI is not canonical"))
    return parsed


def escape_mention_label(label: str) -> str:
    """Backslash-escape ``\\`` and ``]`` only, as upstream does (``[`` and ``)`` stay)."""
    return _ESCAPE.sub(lambda m: "\\" + m.group(), label)


def unescape_mention_label(raw_label: str) -> str:
    """``/\\\\(.)/gu -> '$1'``: a backslash before a line terminator stays as it is."""
    return _UNESCAPE.sub(r"\1", raw_label) if "\\" in raw_label else raw_label


def format_session_reference_mention(session_id: str, label: str | None = None) -> str:
    """``@[escaped label](canonical uri)``; the label defaults to the id."""
    shown = session_id if label is None else label
    return f"@[{escape_mention_label(shown)}]({encode_session_reference_uri(session_id)})"


@dataclass(frozen=True)
class Match:
    """One match of :data:`MENTION_PATTERN`: where it is, its raw label (``None`` for a bare URI)
    and its URI."""

    start: int
    end: int
    raw_label: str | None
    uri: str
    uri_start: int


class _Next:
    """The first place at or after an offset where ``pattern`` occurs in ``text``, remembered: the
    scan asks with offsets that only grow, so each stretch of the text is searched once, however
    many mentions ask (a ``find`` to the end per mention made 322,000 mentions take 20 s)."""

    __slots__ = ("_asked", "_found", "_search", "_text")

    def __init__(self, text: str, pattern: re.Pattern[str]) -> None:
        self._text = text
        self._search = pattern.search
        self._asked = len(text) + 1
        self._found = -1

    def at(self, pos: int) -> int:
        """The offset of the first occurrence at or after ``pos``, or -1."""
        if not (self._asked <= pos and (self._found < 0 or self._found >= pos)):
            found = self._search(self._text, pos)
            self._asked, self._found = pos, -1 if found is None else found.start()
        return self._found


_CLOSE: Final = re.compile(r"\]")
_BACKSLASH: Final = re.compile(r"\\")
_URI_STOP: Final = re.compile("[" + JS_SPACE + ")]")
"""Where a mention's URI stops (the pattern's run of neither white space nor ``)``): a mention
only if at a ``)``."""
_TAIL_HEAD: Final = "](" + SESSION_REFERENCE_SCHEME


def find_mentions(text: str) -> Iterator[Match]:
    """The matches ``MENTION_PATTERN.finditer(text)`` gives, in time linear in the text.

    The regex itself takes time quadratic in a prompt such as ``@[@[@[…`` (each ``@[`` scans
    to the end for its ``]``; 80 KB of them took 85 s) and holds the interpreter meanwhile.
    A match can only begin at ``@[`` (a mention) or ``dsh-session:`` (a bare URI), so only
    those places are tried; every ``@[`` inside a label that does not end in
    ``](dsh-session:…)`` shares that label's end (its escapes pair up the same way from the
    character after it), so it is skipped rather than scanned again; and the next ``]``,
    backslash and end of a URI are each searched for once per stretch of text (:class:`_Next`),
    not once per mention (``@[a](dsh-session:`` repeated without a ``)``: 128 KB took 23 s).
    """
    pos = 0
    next_open = text.find(_LABEL_OPEN)
    next_bare = text.find(SESSION_REFERENCE_SCHEME)
    close, slash, stop = _Next(text, _CLOSE), _Next(text, _BACKSLASH), _Next(text, _URI_STOP)
    dead = -1
    """An ``@[`` before this offset lies in a label known not to make a mention."""
    while True:
        if 0 <= next_open < pos:
            next_open = text.find(_LABEL_OPEN, pos)
        if 0 <= next_bare < pos:
            next_bare = text.find(SESSION_REFERENCE_SCHEME, pos)
        if next_open < 0 and next_bare < 0:
            return
        if next_bare < 0 or 0 <= next_open < next_bare:
            at = next_open
            if at >= dead:
                label_end = _label_end(text, at + len(_LABEL_OPEN), close, slash)
                if text.startswith(_TAIL_HEAD, label_end):
                    uri_start = label_end + 2
                    uri_end = stop.at(uri_start + len(SESSION_REFERENCE_SCHEME))
                    if uri_end >= 0 and text[uri_end] == ")":
                        label = text[at + 2 : label_end]
                        yield Match(at, uri_end + 1, label, text[uri_start:uri_end], uri_start)
                        pos = uri_end + 1
                        continue
                dead = label_end
        else:
            at = next_bare
            bare = _BARE.match(text, at)
            if bare is not None:
                yield Match(at, bare.end(), None, bare.group(), at)
                pos = bare.end()
                continue
        pos = at + 1


def _label_end(text: str, start: int, close_at: _Next, slash_at: _Next) -> int:
    """Where the label of :data:`MENTION_PATTERN` matched from ``start`` stops: at the first ``]``
    not escaped, at a backslash that escapes nothing (before a line terminator or the end), or at
    the end."""
    end = len(text)
    close = close_at.at(start)
    at = start
    while True:
        slash = slash_at.at(at)
        if slash < 0 or 0 <= close < slash:
            return end if close < 0 else close
        if slash + 1 >= end or text[slash + 1] in _LINE_TERMINATORS:
            return slash
        at = slash + 2  # a backslash and the character it escapes
        if 0 <= close < at:
            close = close_at.at(at)


def parse_session_reference_text(text: str) -> ParsedText:
    """Replace each mention or bare canonical URI with ``@label``; throw on the first invalid one."""
    text = js_normalize(text)
    references: list[SessionReference] = []
    parts: list[str] = []
    done = 0
    decoded: dict[str, str] = {}  # a prompt repeats its URIs: each is decoded once
    with _acyclic():
        for match in find_mentions(text):
            session_id = decoded.get(match.uri)
            if session_id is None:
                session_id = decoded[match.uri] = decode_session_reference_uri(match.uri)
            label = session_id if match.raw_label is None else unescape_mention_label(match.raw_label)
            references.append(SessionReference(session_id, label))
            parts += [text[done : match.start], "@", label]
            done = match.end
    parts.append(text[done:])
    return ParsedText("".join(parts), references)


def composer_text(text: str) -> str:
    """What dsh web's composer sends for a prompt's text (a file, an editor's document):
    ``draft.trim()`` (JS ``String.prototype.trim``: whitespace and line breaks off both ends,
    after its mention chips are written out as ``@[label](uri)``). A chat box never sends a final
    newline; a file nearly always ends with one. This is the one place that step is taken: for
    :func:`parse_prompt_text`, and for the text the language server sends to dsh
    (``dshSessionReference.send``)."""
    return js_normalize(text).strip(JS_TRIMMED)


def parse_prompt_text(text: str) -> ParsedText:
    """A prompt's text parsed as the message dsh's composer sends (:func:`composer_text`), which
    the host parses as it gets it: for the CLI (``prepare``, ``parse``) and the language server
    (preview, model-facing text, the summary's bytes); what upstream's
    ``parseSessionReferenceText`` does with a string, :func:`parse_session_reference_text` does.
    """
    return parse_session_reference_text(composer_text(text))


# --- lenient scanner --------------------------------------------------------------------------

Problem = Literal["malformed", "noncanonical", "not-a-string", "empty"]


@dataclass(frozen=True)
class MentionSpan:
    """One mention-like match, valid or not, with what an editor needs to flag and fix it.

    Offsets index the (JS-normalized) text. ``canonical_uri`` is set for valid
    spans and for invalid ones whose intended id could be recovered; then
    ``recovered_id`` is that id and ``replace_end`` says how much of the text
    the canonical URI stands for (a bare URI glued to a following word keeps
    that word after the fix).
    """

    start: int
    end: int
    kind: Literal["markdown", "bare"]
    uri: str
    uri_start: int
    raw_label: str | None
    label: str | None
    session_id: str | None
    problem: Problem | None
    reason: str
    canonical_uri: str | None
    recovered_id: str | None
    uri_replace_end: int

    @property
    def valid(self) -> bool:
        return self.problem is None


def scan_session_references(text: str) -> list[MentionSpan]:
    """Every match of the parser's pattern, judged by the parser's own decoder.

    Hundreds of thousands of spans may be made at once (:func:`_acyclic`)."""
    with _acyclic():
        return list(iter_session_references(text))


@contextlib.contextmanager
def _acyclic() -> Iterator[None]:
    """The cyclic collector held off while a scan or parse makes objects that cannot form a cycle,
    hundreds of thousands at once in a big prompt: its collections of the growing list took a
    quarter of the scan of 10 MB of mentions (0.7 of 2.5 s)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def iter_session_references(text: str) -> Iterator[MentionSpan]:
    text = js_normalize(text)
    judged: dict[tuple[str, str], _Verdict] = {}  # a prompt repeats its URIs: each is judged once
    for match in find_mentions(text):
        raw_label, uri, uri_start = match.raw_label, match.uri, match.uri_start
        kind: Literal["markdown", "bare"] = "bare" if raw_label is None else "markdown"
        label = None if raw_label is None else unescape_mention_label(raw_label)
        verdict = judged.get((uri, kind))
        if verdict is None:
            verdict = judged[uri, kind] = _judge(uri, kind)
        session_id, problem, reason, canonical, recovered, consumed = verdict
        uri_end = uri_start + (len(uri) if problem is None else len(SESSION_REFERENCE_SCHEME) + consumed)
        yield MentionSpan(  # positionally: 300,000 spans by keyword took 0.2 s longer
            match.start,
            match.end,
            kind,
            uri,
            uri_start,
            raw_label,
            session_id if label is None else label,
            session_id,
            problem,
            reason,
            canonical,
            recovered,
            uri_end,
        )


_Verdict = tuple[str | None, Problem | None, str, str | None, str | None, int]
"""A URI judged: its session id, problem, reason, canonical URI, recovered id and how many payload
characters the recovered id accounts for."""


def _judge(uri: str, kind: str) -> _Verdict:
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError:
        problem, reason, recovered, consumed = _diagnose(uri, kind)
        canonical = None if recovered is None else encode_session_reference_uri(recovered)
        return None, problem, reason, canonical, recovered, consumed
    return session_id, None, "", uri, session_id, len(uri)


def _diagnose(uri: str, kind: str) -> tuple[Problem, str, str | None, int]:
    """Why ``uri`` is rejected, and the id it most plausibly meant.

    Returns the problem, a reason for people, the recovered id (or ``None``)
    and how many payload characters that recovered id accounts for.
    """
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    if payload == "":
        return "empty", "the dsh-session: URI has no payload", None, 0
    if _PAYLOAD.fullmatch(payload):
        try:
            value = _decode_payload(payload)
        except (ValueError, binascii.Error):
            value = _NOT_JSON
        if isinstance(value, str):
            return (
                "noncanonical",
                f"the URI names session {js_stringify(display_label(value))} but is not in canonical form",
                value,
                len(payload),
            )
        if value is not _NOT_JSON:
            return "not-a-string", "the URI's payload decodes to JSON that is not a string", None, 0
    prefix = _longest_canonical_prefix(payload)
    if prefix is not None:
        recovered, consumed = prefix
        rest = payload[consumed:]
        where = "is followed by" if kind == "markdown" else "runs into"
        return (
            "malformed",
            f"the URI for session {js_stringify(display_label(recovered))} {where} {js_stringify(rest[:20])}",
            recovered,
            consumed,
        )
    if not _PAYLOAD.fullmatch(payload):
        return (
            "malformed",
            "the URI's payload has characters outside base64url (A-Z a-z 0-9 _ -)",
            None,
            0,
        )
    return "malformed", "the URI's payload is not base64url-encoded JSON", None, 0


_NOT_JSON = object()
_MAX_RECOVERY_CANDIDATES = 64


def _longest_canonical_prefix(payload: str) -> tuple[str, int] | None:
    """The longest payload prefix that is itself a canonical URI payload.

    Only prefixes whose decoded bytes end in ``"`` can be JSON strings, so the
    search tries those ends (longest first, a bounded number) instead of every
    prefix: a 1 MB payload costs one base64 decode.
    """
    head = _PAYLOAD.match(payload)
    if head is None:
        return None
    chars = head.group()
    usable = len(chars) - (1 if len(chars) % 4 == 1 else 0)
    try:
        raw = base64.urlsafe_b64decode(chars[:usable] + "=" * (-usable % 4))
    except (ValueError, binascii.Error):
        return None
    tried = 0
    end = raw.rfind(b'"')
    while end > 0 and tried < _MAX_RECOVERY_CANDIDATES:
        tried += 1
        candidate = raw[: end + 1]
        encoded = base64.urlsafe_b64encode(candidate).rstrip(b"=").decode("ascii")
        if payload.startswith(encoded):
            try:
                value = json.loads(candidate.decode("utf-8"))
            except ValueError:
                value = None
            if (
                isinstance(value, str)
                and encode_session_reference_uri(value) == SESSION_REFERENCE_SCHEME + encoded
            ):
                return value, len(encoded)
        end = raw.rfind(b'"', 0, end)
    return None
