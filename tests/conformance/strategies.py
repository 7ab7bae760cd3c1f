"""Hypothesis strategies for the differential suite.

Everything generated here is plain JSON-shaped data that both sides receive
unchanged: the oracle over JSON lines, the Python port as Python objects. Strings
are JavaScript strings in the making: they mix the characters that break ports
(``]``, ``\\``, quotes, line terminators, JS-vs-Python whitespace, ``<``, astral
characters and lone surrogates, including a high and a low surrogate that end up
adjacent and so form one astral character in JS).

Session stores are generated as event lists that upstream's ``Session.append``
accepts (valid message shapes, replace ops over the current surface, packable
chunk runs, titles, open turns with pending tool calls), so that upstream's own
JSONL persistence can write them as real sessions roots.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import icu
from hypothesis import strategies as st

from dsh_session_reference.jsjson import js_normalize

# ---------------------------------------------------------------- characters and text

LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
SPECIAL_CHARACTERS = [
    *"]\\[\"'()@<>/:-_.`$&*#!?=%+~ ",
    "\n",
    "\r",
    "\t",
    "\x0b",
    "\x0c",
    "\u2028",
    "\u2029",
    "\x00",
    "\x1c",
    "\x1f",
    "\x7f",
    "\x85",
    "\ufeff",
    "\xa0",
    "\u3000",
    "界",
    "引",
    "é",
    "Ä",
    "ä",
    "ß",
    "İ",
    "Σ",
    "ǅ",
    "😀",
    "\U0001d11e",
    "\u0301",
]
BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
SCHEME = "dsh-session:"

characters = st.one_of(
    st.sampled_from(SPECIAL_CHARACTERS),
    st.sampled_from(LONE_SURROGATES),
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(),
)


def js_text(max_size: int = 16, min_size: int = 0) -> st.SearchStrategy[str]:
    return st.text(alphabet=characters, min_size=min_size, max_size=max_size)


INTERESTING_IDS = [
    "",
    "abc",
    "s-001",
    "source",
    "source]",
    "target",
    "0198c2a4-7b1e-7c3d-9f00-123456789abc",
    'unicode/引号"/slash\\/line\n',
    "\ud800",
    "a]b",
    "a\\b",
    'q"uote',
    "sess-b",
    "sess-C",
    "x-ä",
    "x-Z",
    "a",
    "A",
    ".",
    "..",
    "~",
    "~0041",
    "a b",
    "line\nbreak",
    "😀",
    "\ud83d\ude00",
    "dsh-session:ImFiYyI",
    "@[x](y)",
    "<tag>",
]

session_ids = st.one_of(st.sampled_from(INTERESTING_IDS), js_text(12))
labels = st.one_of(st.none(), st.sampled_from(["", "a]b\\c)d[e", "源]会话", "$&$1", "Src <x>"]), js_text(12))


def encode_uri(session_id: str) -> str:
    """Test-side encoder used only to *build* inputs (both sides then judge them)."""
    text = json.dumps(js_normalize(session_id), ensure_ascii=False)
    raw = text.encode("utf-8", "surrogatepass")
    return SCHEME + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


# ---------------------------------------------------------------- URIs and mentions


@st.composite
def noncanonical_payloads(draw: st.DrawFn) -> str:
    """Base64url-shaped payloads that are not a canonical encoding of any id."""
    session_id = draw(session_ids.filter(lambda s: not any(c in s for c in LONE_SURROGATES)))
    canonical = encode_uri(session_id)[len(SCHEME) :]
    mutation = draw(st.integers(0, 9))
    if mutation == 0:  # padding
        return canonical + "=" * draw(st.integers(1, 2))
    if mutation == 1:  # stray trailing bits or a changed last character
        return canonical[:-1] + draw(st.sampled_from(BASE64URL))
    if mutation == 2:  # a glued word character
        return canonical + draw(st.sampled_from(BASE64URL))
    if mutation == 3:  # JSON whitespace
        return _b64((" " + json.dumps(session_id, ensure_ascii=False) + " ").encode("utf-8", "surrogatepass"))
    if mutation == 4:  # \u escapes instead of raw characters
        return _b64(json.dumps(session_id, ensure_ascii=True).encode("ascii"))
    if mutation == 5:  # JSON that is not a string
        value = draw(st.sampled_from(["123", '{"id":"x"}', "null", "true", "[]", '["a"]', "1e3", '"a"x']))
        return _b64(value.encode("ascii"))
    if mutation == 6:  # arbitrary bytes (often invalid UTF-8)
        return _b64(draw(st.binary(min_size=1, max_size=12)))
    if mutation == 7:  # truncated
        return canonical[: draw(st.integers(1, max(1, len(canonical) - 1)))]
    if mutation == 8:  # standard base64 alphabet
        return base64.b64encode(json.dumps(session_id).encode()).decode("ascii")
    return draw(st.text(alphabet=BASE64URL, min_size=1, max_size=24))


uris = st.one_of(
    session_ids.map(encode_uri),
    noncanonical_payloads().map(lambda p: SCHEME + p),
)

decode_inputs = st.one_of(
    uris,
    st.sampled_from(
        [
            "",
            SCHEME,
            "dsh-session:IiJ",
            "dsh-session:IiI=",
            "dsh-session:abc",
            "dsh-session:MTIz",
            "DSH-SESSION:ImFiYyI",
            " dsh-session:ImFiYyI",
            "dsh-session:ImFiYyI ",
            "dsh-session:ImFiYyI\n",
            "https://example.test",
            "dsh-session:%%%",
        ]
    ),
    st.builds(lambda p: SCHEME + p, js_text(16)),
    js_text(20),
)


@st.composite
def mention_fragments(draw: st.DrawFn) -> str:
    """One piece of prompt text: a valid or broken mention, a bare URI, a near-miss, or prose."""
    session_id = draw(session_ids)
    label = draw(labels)
    uri = encode_uri(session_id)
    shown = session_id if label is None else label
    escaped = shown.replace("\\", "\\\\").replace("]", "\\]")
    kind = draw(st.integers(0, 15))
    if kind == 0:
        return f"@[{escaped}]({uri})"
    if kind == 1:
        return uri
    if kind == 2:  # raw, unescaped label (may end early or escape oddly)
        return f"@[{shown}]({uri})"
    if kind == 3:
        return f"@[{escaped}]({SCHEME}{draw(noncanonical_payloads())})"
    if kind == 4:
        return SCHEME + draw(noncanonical_payloads())
    if kind == 5:  # structurally broken Markdown: the bare form may still match inside
        return draw(
            st.sampled_from(
                [
                    f"@[{escaped}]({uri}",
                    f"[{escaped}]({uri})",
                    f"@[{escaped}] ({uri})",
                    f"@[{escaped}]({uri} )",
                    f"@[{escaped}]( {uri})",
                    f"@[{escaped}]({uri}!)",
                    f"@[a\\\nb]({uri})",
                    f"@[a\\\u2028b]({uri})",
                    f"@[a\nb]({uri})",
                    f"@[x](https://e.test) [y]({uri})",
                    f"@[{escaped}\\]({uri})",
                ]
            )
        )
    if kind == 6:
        return draw(
            st.sampled_from(
                [
                    SCHEME,
                    "dsh-session:%%",
                    "dsh-session: and dsh-session:%%",
                    "what is a dsh-session: URI?",
                    "@[x](dsh-session:)",
                    "@[x](dsh-session:IiI=)",
                    "DSH-SESSION:ImFiYyI",
                    "dsh-sessionn:ImFiYyI",
                    "dsh-session:ImFiYyI\u200b",
                    "@[](dsh-session:ImFiYyI)",
                    "@[$&$1](dsh-session:ImFiYyI)",
                    "@@[x](dsh-session:ImFiYyI)",
                    "@[[x]](dsh-session:ImFiYyI)",
                ]
            )
        )
    if kind == 7:  # a bare URI glued to a word character or punctuation
        return (
            draw(st.sampled_from(["x", "", "."]))
            + uri
            + draw(st.sampled_from(["y", ".", "`", ")", "]", "_"]))
        )
    if kind == 8:  # a label with escapes of every kind
        raw = draw(
            st.text(
                alphabet=st.sampled_from(["\\", "]", "[", "a", "\n", "\r", "\u2028", " ", ")"]), max_size=8
            )
        )
        return f"@[{raw}]({uri})"
    return draw(js_text(12))


mention_texts = st.lists(mention_fragments(), max_size=6).map("".join)

format_inputs = st.tuples(session_ids, labels)

# ---------------------------------------------------------------- JSON values (tag-safe JSON)

_ARRAY_INDEX_KEY = "0123456789"


def _plain_key(key: str) -> bool:
    """JS objects list integer-like keys first; data objects upstream serializes never have
    them, so generated objects avoid them (and ``__proto__``) to keep key order comparable."""
    return not (key and all(c in _ARRAY_INDEX_KEY for c in key)) and key != "__proto__"


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    js_text(12),
    st.sampled_from(["<", "</referenced-sessions>", "<<>>", "\u003c"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(js_text(6).filter(_plain_key), children, max_size=4),
    ),
    max_leaves=12,
)

# ---------------------------------------------------------------- message texts

_REPEATABLE = [
    "A",
    "界",
    "<",
    'x<y "q"\n',
    "é",
    "😀",
    "\\",
    "ab",
    "\ud800",
    "a\u2028",
    "</referenced-sessions>",
]

long_texts = st.one_of(
    st.builds(lambda unit, n: unit * n, st.sampled_from(_REPEATABLE), st.integers(1, 400)),
    st.builds(
        lambda head, unit, n, tail: head + unit * n + tail,
        js_text(6),
        js_text(4, 1),
        st.integers(1, 120),
        js_text(8),
    ),
)
message_texts = st.one_of(
    js_text(24),
    long_texts,
    long_texts,
    mention_texts,
    st.sampled_from(["", "hello", "hi there", "<compacted-summary>checkpoint</compacted-summary>"]),
)


@st.composite
def content_blocks(draw: st.DrawFn, *, allow_empty: bool = True) -> list[dict[str, Any]]:
    """User/assistant content: text blocks mixed with reasoning, images and odd text values."""
    blocks: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0 if allow_empty else 1, 3))):
        kind = draw(st.integers(0, 9))
        if kind <= 5:
            blocks.append({"type": "text", "text": draw(message_texts)})
        elif kind == 6:
            blocks.append({"type": "reasoning", "text": draw(message_texts)})
        elif kind == 7:
            blocks.append({"type": "image", "attachment": {"id": "att-1", "mimeType": "image/png"}})
        elif kind == 8:
            blocks.append({"type": "text", "text": draw(st.sampled_from([None, 42, ["x"], {"t": "x"}]))})
        else:
            blocks.append({"type": "text", "text": ""})
    return blocks


# ---------------------------------------------------------------- surface events

USER_SOURCES: list[dict[str, Any]] = [
    {"kind": "user"},
    {"kind": "user"},
    {"kind": "user"},
    {"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"},
    {"kind": "plugin", "plugin": "compact", "compactionId": "cmp-2", "sourceCommandId": "cmd-1"},
    {"kind": "plugin", "plugin": "goal"},
    {"kind": "plugin", "plugin": "workspace"},
    {"kind": "plugin", "plugin": "session-reference"},
    {"kind": "session-reference", "form": "recall", "version": 1, "references": []},
    {"kind": "compact"},
]
CHECKPOINT_SOURCE: dict[str, Any] = {"kind": "plugin", "plugin": "compact", "compactionId": "cmp-9"}
MODEL_SOURCE: dict[str, Any] = {"kind": "model", "provider": "mock", "model": "mock-1"}


def user_message(message_id: str, content: list[dict[str, Any]], source: dict[str, Any]) -> dict[str, Any]:
    """``createUserMessage``'s shape and key order."""
    return {"content": content, "source": source, "role": "user", "id": message_id}


def assistant_data(
    message_id: str, content: list[dict[str, Any]], turn: int, step: int, interrupted: bool = False
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {"role": "assistant", "content": content, "source": MODEL_SOURCE, "id": message_id},
    }
    if interrupted:
        data["interrupted"] = True
    return data


def tool_result_data(message_id: str, call_id: str, text: str, turn: int, step: int) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                }
            ],
            "id": message_id,
        },
    }


@st.composite
def surface_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Already-folded surface events (the ``events`` of a ``readSurface`` snapshot)."""
    events: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 7))):
        kind = draw(st.integers(0, 5))
        if kind <= 2:
            source = draw(st.sampled_from(USER_SOURCES))
            events.append(
                {"type": "user/message", "data": user_message(f"u{index}", draw(content_blocks()), source)}
            )
        elif kind <= 4:
            events.append(
                {
                    "type": "assistant/message",
                    "data": assistant_data(
                        f"a{index}", draw(content_blocks()), 1, index, draw(st.booleans())
                    ),
                }
            )
        else:
            events.append(
                {
                    "type": "tool/result",
                    "data": tool_result_data(f"t{index}", f"call-{index}", "out", 1, index),
                }
            )
    return events


budgets = st.one_of(
    st.integers(1, 130),
    st.integers(100, 700),
    st.integers(600, 4000),
    st.sampled_from([16, 120, 150, 200, 300, 360, 1000, 65536]),
)


@dataclass(frozen=True)
class SnapshotCase:
    """A ``retainReferencedSession`` input: snapshot, label and byte budget."""

    session_id: str
    cwd: str | None
    captured_through_seq: int | None
    events: list[dict[str, Any]]
    label: str
    max_bytes: int

    def oracle_args(self) -> dict[str, Any]:
        session: dict[str, Any] = {"id": self.session_id}
        if self.cwd is not None:
            session["cwd"] = self.cwd
        return {
            "snapshot": {
                "session": session,
                "capturedThroughSeq": self.captured_through_seq,
                "events": self.events,
            },
            "label": self.label,
            "maxBytes": self.max_bytes,
        }


CWDS = [
    "/w",
    "/same",
    "/home/u/proj",
    "/home/u/proj/",
    "/tmp/with space",
    "/引号/プロジェクト",
    "/a:b\\c",
    "/",
    "/x" + "y" * 300,
    "/x" + "y" * 300 + "z",
    "/ÄÖ/ß",
]
cwds = st.one_of(st.none(), st.sampled_from(CWDS), js_text(10).map(lambda s: "/" + s))


def _data_bytes(session_id: str, label: str, cwd: str | None, seq: int | None, texts: list[str]) -> int:
    """Approximate serialized size, only to aim budgets where retention has work to do."""
    value = {
        "sessionId": session_id,
        "label": label,
        "cwd": cwd,
        "capturedThroughSeq": seq,
        "conversation": [{"role": "user", "text": t} for t in texts],
    }
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in ("user/message", "assistant/message")]


def _texts(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        if event["type"] == "tool/result":
            continue
        message = event["data"] if event["type"] == "user/message" else event["data"]["message"]
        source = message["source"]
        if event["type"] == "user/message" and source["kind"] != "user" and source.get("plugin") != "compact":
            continue
        blocks = [
            b["text"]
            for b in message.get("content", [])
            if b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        out.append("\n".join(blocks))
    return out


def aimed_budgets(fixed: int, total: int) -> st.SearchStrategy[int]:
    """Budgets around the interesting thresholds: below the fixed fields (BUDGET_EXCEEDED),
    between fixed and full size (phase-1 drops, phase-2 truncation), and roomy."""
    return st.one_of(
        st.integers(max(1, fixed - 8), fixed + 80),
        st.integers(fixed + 40, fixed + 400),
        st.integers(max(1, fixed), max(fixed, total)),
        st.integers(max(1, fixed), max(fixed, total)),
        st.integers(max(1, total - 40), total + 40),
        budgets,
    )


@st.composite
def snapshot_cases(draw: st.DrawFn) -> SnapshotCase:
    session_id = draw(session_ids)
    cwd = draw(cwds)
    seq = draw(st.one_of(st.none(), st.integers(0, 10_000)))
    events = draw(surface_events())
    label = draw(st.one_of(session_ids, js_text(12)))
    fixed = _data_bytes(session_id, label, cwd, seq, [])
    total = _data_bytes(session_id, label, cwd, seq, _texts(events))
    return SnapshotCase(session_id, cwd, seq, events, label, draw(aimed_budgets(fixed, total)))


# ---------------------------------------------------------------- whole session logs


@dataclass
class _LogBuilder:
    """Tracks what ``Session.append`` validates: contiguous seqs and the current surface."""

    prefix: str
    events: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    open_turn: int | None = None
    open_step: int | None = None
    turn: int = 0
    step: int = 0
    calls: int = 0

    @property
    def seq(self) -> int:
        return len(self.events)

    def message_id(self) -> str:
        return f"{self.prefix}-m{self.seq}"

    def append(
        self,
        kind: str,
        data: dict[str, Any],
        surface_op: Any = None,
        source_event_seqs: list[int] | None = None,
    ) -> None:
        event: dict[str, Any] = {"type": kind, "data": data}
        if surface_op is not None:
            event["surfaceOp"] = surface_op
        if source_event_seqs is not None:
            event["sourceEventSeqs"] = source_event_seqs
        if surface_op == "append":
            self.nodes.append(self.seq)
        elif isinstance(surface_op, dict):
            start = self.nodes.index(surface_op["start"])
            end = self.nodes.index(surface_op["end"])
            self.nodes[start : end + 1] = [self.seq]
        self.events.append(event)


@st.composite
def session_logs(draw: st.DrawFn, prefix: str) -> list[dict[str, Any]]:
    """A valid event list for one session: messages, replaces, chunks, titles, turns, tools."""
    log = _LogBuilder(prefix)
    if chance(draw, 3):
        log.turn = log.open_turn = 1
        log.append("turn/start", {"turn": 1})
    for _ in range(draw(st.sampled_from([0, 1, 2, 3]) | st.integers(1, 12))):
        kind = draw(st.integers(0, 13))
        turn = log.open_turn if log.open_turn is not None else log.turn
        step = log.open_step if log.open_step is not None else log.step
        if kind <= 2:
            source = draw(st.sampled_from(USER_SOURCES))
            log.append(
                "user/message", user_message(log.message_id(), draw(content_blocks()), source), "append"
            )
        elif kind == 3 and log.nodes:
            # A compaction checkpoint (or another message) replacing a current range.
            start = draw(st.integers(0, len(log.nodes) - 1))
            end = draw(st.integers(start, len(log.nodes) - 1))
            shadowed = log.nodes[start : end + 1]
            others = [s for s in range(log.seq) if s not in shadowed]
            extra = draw(st.lists(st.sampled_from(others), unique=True, max_size=2)) if others else []
            sources = draw(st.permutations(shadowed + extra))
            op = {"op": "replace", "start": log.nodes[start], "end": log.nodes[end]}
            if not chance(draw, 4):
                source = draw(st.sampled_from([CHECKPOINT_SOURCE, {"kind": "user"}]))
                log.append(
                    "user/message",
                    user_message(log.message_id(), draw(content_blocks()), source),
                    op,
                    sources,
                )
            else:
                data = assistant_data(log.message_id(), draw(content_blocks()), turn, step)
                log.append("assistant/message", data, op, sources)
        elif kind in (4, 5):
            content = draw(content_blocks())
            if chance(draw, 5):
                log.calls += 1
                content = [
                    *content,
                    {
                        "type": "tool-call",
                        "id": f"{prefix}-call-{log.calls}",
                        "name": "bash",
                        "arguments": "{}",
                    },
                ]
            data = assistant_data(log.message_id(), content, turn, step, chance(draw, 6))
            log.append("assistant/message", data, "append")
        elif kind == 6:
            log.calls += 1
            call_id = f"{prefix}-call-{log.calls}"
            if draw(st.booleans()):
                log.append("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "bash"})
            log.append(
                "tool/result",
                tool_result_data(log.message_id(), call_id, draw(message_texts), turn, step),
                "append",
            )
        elif kind == 7:
            # A run of streamed deltas; three or more consecutive ones pack into one row.
            chunk_kind = draw(st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta"]))
            index = draw(st.integers(0, 1))
            for _ in range(draw(st.integers(1, 5))):
                if chunk_kind == "tool-call-delta":
                    chunk: dict[str, Any] = {
                        "type": chunk_kind,
                        "index": index,
                        "id": f"{prefix}-tc",
                        "name": "bash",
                        "argumentsDelta": draw(js_text(4)),
                    }
                else:
                    chunk = {"type": chunk_kind, "index": index, "text": draw(js_text(6))}
                log.append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        elif kind in (8, 9):
            title = draw(
                st.one_of(
                    js_text(16), st.sampled_from(["", "Latest title", "Refactor <parser>", "引号 title"])
                )
            )
            log.append(
                "session/title",
                {
                    "title": title,
                    "messageSeqs": [],
                    "source": {"kind": draw(st.sampled_from(["fallback", "provider", "user"]))},
                },
            )
        elif kind == 10 and log.open_turn is None:
            log.turn += 1
            log.open_turn = log.turn
            log.append("turn/start", {"turn": log.turn})
        elif kind == 11 and log.open_turn is not None:
            if log.open_step is not None:
                log.append("step/end", {"turn": log.open_turn, "step": log.open_step})
                log.open_step = None
            log.append("turn/end", {"turn": log.open_turn, "reason": {"kind": "completed"}})
            log.open_turn = None
        elif kind == 12 and log.open_turn is not None and log.open_step is None:
            log.step += 1
            log.open_step = log.step
            log.append("step/start", {"turn": log.open_turn, "step": log.step})
        else:
            log.append("todo/write", {"todos": [{"content": draw(js_text(6)), "status": "pending"}]})
    if log.open_turn is not None and not chance(draw, 3):
        log.append("turn/end", {"turn": log.open_turn, "reason": {"kind": "completed"}})
    return log.events


def has_open_turn(events: list[dict[str, Any]]) -> bool:
    """Upstream's reader closes an open tail turn with synthetic events; in memory it stays open."""
    open_turn = False
    for event in events:
        if event["type"] == "turn/start":
            open_turn = True
        elif event["type"] == "turn/end":
            open_turn = False
    return open_turn


# ---------------------------------------------------------------- stores and resolver ops

CREATED_AT = [0, 1, 2, 7, 10, 1_700_000_000_000]
_ROOT_COLLATOR = icu.Collator.createInstance(icu.Locale.getRoot())

store_ids = st.one_of(st.sampled_from([i for i in INTERESTING_IDS if i]), js_text(10, 1))


@dataclass(frozen=True)
class StoreSession:
    session_id: str
    cwd: str | None
    created_at: int
    events: list[dict[str, Any]]

    def oracle_spec(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"createdAt": self.created_at}
        if self.cwd is not None:
            meta["cwd"] = self.cwd
        return {"id": self.session_id, "meta": meta, "events": self.events}


@dataclass(frozen=True)
class Agent:
    id: str
    cwd: str | None

    def oracle_spec(self) -> dict[str, Any]:
        return {"id": self.id} if self.cwd is None else {"id": self.id, "cwd": self.cwd}


@dataclass(frozen=True)
class ListOp:
    agent: Agent
    query: str | None  # None: argument omitted
    limit: Any  # OMIT: argument omitted
    remote: bool = False  # upstream's remote face: configured limit, each with its mention

    def oracle_spec(self) -> dict[str, Any]:
        if self.remote:
            return {"kind": "candidates", "agent": self.agent.oracle_spec(), "query": self.query}
        spec: dict[str, Any] = {"kind": "list", "agent": self.agent.oracle_spec()}
        if self.query is not None:
            spec["query"] = self.query
        if self.limit is not OMIT:
            spec["limit"] = self.limit
        return spec


@dataclass(frozen=True)
class PrepareOp:
    agent: Agent
    content: list[Any]
    references: list[Any]
    as_objects: bool  # pass well-formed references to Python as SessionReference objects

    def oracle_spec(self) -> dict[str, Any]:
        return {
            "kind": "prepare",
            "agent": self.agent.oracle_spec(),
            "content": self.content,
            "references": self.references,
        }


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


@dataclass(frozen=True)
class ResolverConfigCase:
    max_references: int
    candidate_limit: int
    max_reference_bytes: int

    def oracle_spec(self) -> dict[str, int]:
        return {
            "maxReferences": self.max_references,
            "candidateLimit": self.candidate_limit,
            "maxReferenceBytes": self.max_reference_bytes,
        }


@dataclass(frozen=True)
class StoreCase:
    """A generated sessions root plus the resolver calls to make against it."""

    sessions: list[StoreSession]
    compression: str
    pack_chunks: bool
    config: ResolverConfigCase
    ops: list[ListOp | PrepareOp]

    @property
    def memory_matches_disk(self) -> bool:
        """Whether upstream's in-memory answers must equal its on-disk ones: the disk
        never lists a session without events and closes open turns when reading."""
        return all(s.events and not has_open_turn(s.events) for s in self.sessions)


def _collation_distinct(ids: list[str]) -> bool:
    keys = [_ROOT_COLLATOR.getSortKey(js_normalize(i)) for i in ids]
    return len(set(keys)) == len(keys)


@st.composite
def store_sessions(draw: st.DrawFn) -> list[StoreSession]:
    count = draw(st.one_of(st.integers(1, 6), st.integers(3, 6)))
    ids = draw(
        st.lists(store_ids, min_size=count, max_size=count, unique_by=js_normalize).filter(
            # ICU calls some distinct ids equal ("a" and "a\0"); with a createdAt tie their
            # order would depend on directory enumeration on both sides, so keep them apart.
            _collation_distinct
        )
    )
    sessions = []
    for index, session_id in enumerate(ids):
        sessions.append(
            StoreSession(
                session_id=session_id,
                cwd=draw(cwds),
                created_at=draw(st.one_of(st.sampled_from(CREATED_AT), st.integers(0, 2**53 - 1))),
                events=draw(session_logs(prefix=f"s{index}")),
            )
        )
    return sessions


def _substrings(values: list[str]) -> st.SearchStrategy[str]:
    if not values:
        return st.just("")
    return st.sampled_from(values).flatmap(
        lambda v: st.tuples(st.integers(0, len(v)), st.integers(0, len(v))).map(
            lambda ab: v[min(ab) : max(ab)]
        )
    )


INVALID_REFERENCES: list[Any] = [
    None,
    1,
    "x",
    True,
    [],
    ["source"],
    {},
    {"sessionId": 1},
    {"sessionId": None},
    {"label": "x"},
    {"sessionId": "s", "label": None},
    {"sessionId": "s", "label": 3},
    {"sessionId": ["s"]},
]
# Not all invalid: 2**53 - 1 and 3.0 are safe integers to JS, so both sides must accept them.
INVALID_LIMITS: list[Any] = [0, -1, 1.5, True, False, "3", 2**53, -(2**53), 2**53 - 1, 3.0, [], {}]


@st.composite
def store_cases(draw: st.DrawFn) -> StoreCase:
    sessions = draw(store_sessions())
    ids = [s.session_id for s in sessions]
    outsider = draw(session_ids.filter(lambda i: js_normalize(i) not in {js_normalize(x) for x in ids}))
    agents = [Agent(s.session_id, s.cwd) for s in sessions] + [Agent(outsider, draw(cwds))]
    titles = [e["data"]["title"] for s in sessions for e in s.events if e["type"] == "session/title"]
    searchable = ids + [s.cwd for s in sessions if s.cwd is not None] + titles
    queries = st.one_of(
        st.none(),
        st.none(),
        st.just(""),
        _substrings(searchable),
        _substrings(searchable).map(str.upper),
        js_text(4),
    )

    def messy_references(agent: Agent) -> st.SearchStrategy[Any]:
        others = [i for i in ids if i != agent.id] or [outsider]
        existing = st.sampled_from(others).map(lambda i: {"sessionId": i})
        labelled = st.tuples(st.sampled_from(others), labels.filter(lambda x: x is not None)).map(
            lambda t: {"sessionId": t[0], "label": t[1]}
        )
        return st.one_of(
            existing,
            existing,
            labelled,
            session_ids.map(lambda i: {"sessionId": i}),  # usually missing
            st.sampled_from(INVALID_REFERENCES),
        )

    limits = st.one_of(
        st.just(OMIT), st.just(OMIT), st.integers(1, 6), st.integers(1, 6), st.sampled_from(INVALID_LIMITS)
    )
    ops: list[ListOp | PrepareOp] = []
    for _ in range(draw(st.integers(1, 4))):
        agent = draw(st.sampled_from(agents))
        if draw(st.booleans()):
            if chance(draw, 4):
                ops.append(ListOp(agent, draw(queries), OMIT, remote=True))
            else:
                ops.append(ListOp(agent, draw(queries), draw(limits)))
            continue
        readable = [s.session_id for s in sessions if s.events and s.session_id != agent.id]
        if readable and not chance(draw, 3):
            # A clean message: distinct readable sessions within the limit.
            chosen = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3, unique=True))
            refs = [
                {"sessionId": i} if (label := draw(labels)) is None else {"sessionId": i, "label": label}
                for i in chosen
            ]
        else:
            refs = draw(st.lists(messy_references(agent), max_size=4))
        if refs and chance(draw, 8):  # self reference somewhere
            refs.insert(draw(st.integers(0, len(refs))), {"sessionId": agent.id})
        if refs and chance(draw, 4):  # a duplicate with another label
            duplicable = [r for r in refs if isinstance(r, dict)] or [{"sessionId": ids[0]}]
            refs.append(dict(draw(st.sampled_from(duplicable)), label="dup"))
        content: list[Any] = [{"type": "text", "text": draw(mention_texts)}]
        if draw(st.booleans()):
            content.append({"type": "reasoning", "text": "why"})
        ops.append(PrepareOp(agent, content, refs, draw(st.booleans())))
    largest = max(
        sum(len(t.encode("utf-8", "surrogatepass")) + 30 for t in _texts(_messages(s.events)))
        for s in sessions
    )
    config = ResolverConfigCase(
        max_references=draw(st.sampled_from([1, 2, 3, 3, 3])),
        candidate_limit=draw(st.one_of(st.integers(1, 6), st.just(50))),
        max_reference_bytes=draw(
            st.one_of(
                st.just(65536),
                st.integers(100, max(101, largest + 150)),
                st.integers(100, max(101, largest + 150)),
                budgets,
            )
        ),
    )
    return StoreCase(
        sessions=sessions,
        compression=draw(st.sampled_from(["zstd", "none"])),
        pack_chunks=draw(st.booleans()),
        config=config,
        ops=ops,
    )


# ---------------------------------------------------------------- resolver config

config_values = st.one_of(
    st.integers(-3, 6),
    st.sampled_from([2**53 - 1, 2**53, 65536, 1.0, 3.0, 2.5, 0.5, -1.0, True, False, "3", [], {}]),
)


@st.composite
def config_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A config object; absent keys take upstream's defaults."""
    out: dict[str, Any] = {}
    for key in ("maxReferences", "candidateLimit", "maxReferenceBytes"):
        if draw(st.booleans()):
            out[key] = draw(config_values)
    return out


def chance(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in ``one_in`` draws; False is the simplest value, so shrinking removes the rare branch."""
    return draw(st.sampled_from([False] * (one_in - 1) + [True]))


def batched(strategy: st.SearchStrategy[Any], size: int) -> st.SearchStrategy[list[Any]]:
    """``size`` cases per Hypothesis example, answered by the oracle in one round trip."""
    return st.lists(strategy, min_size=size, max_size=size)


# ---------------------------------------------------------------- damaged logs

PLAIN_DAMAGE = [
    "torn-line",
    "garbage-line",
    "blank-line",
    "null-line",
    "number-line",
    "empty-object-line",
    "seq-gap-line",
    "garbage-before-turn-end",
    "bad-packed-row",
    "cut",
    "crlf",
    "invalid-utf8",
]
ZSTD_DAMAGE = ["cut", "junk", "garbage-frame", "torn-frame", "frame-without-checksum"]


@dataclass(frozen=True)
class Damage:
    """What happens to one log of an upstream-written root before both sides read it."""

    target: int  # index into the written files (modulo their count)
    kind: str
    position: float  # where a cut lands, as a fraction of the damageable bytes
    junk: bytes


@st.composite
def damages(draw: st.DrawFn, compression: str) -> Damage:
    kinds = PLAIN_DAMAGE if compression == "none" else ZSTD_DAMAGE
    return Damage(
        target=draw(st.integers(0, 5)),
        kind=draw(st.sampled_from(kinds)),
        position=draw(st.floats(0, 1)),
        junk=draw(st.binary(min_size=1, max_size=8)),
    )


@st.composite
def damaged_store_cases(draw: st.DrawFn) -> tuple[StoreCase, Damage]:
    case = draw(store_cases())
    return case, draw(damages(case.compression))
