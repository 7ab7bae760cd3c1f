"""A realistic dsh sessions root, written in the real on-disk format, for demos and tests.

Everything a real root holds shows up at least once: several projects and a
session without a cwd, titles (one renamed twice), reasoning, streamed
assistant chunks (packed rows), tool calls and results, a compaction
checkpoint that replaced earlier turns, a subagent, a turn cut off by a
crash (read back with recovery closers), a July-era message whose
``envelope.displayContent`` keeps the person's own words, an earlier
session-reference snapshot, a session long enough to need truncation under
the default 65536-byte budget, and an id that needs escaping on disk.

Ids and timestamps are fixed, so the store (and everything derived from it) is
byte-for-byte reproducible. dsh keeps one encoding per root, so the whole
sample is written either as ``.jsonl.zstd`` (dsh's default) or as plain
``.jsonl``.
"""

from __future__ import annotations

import os
from typing import Final

from .store.layout import Compression
from .store.writer import SessionLog, write_session_log

BASE_TIME: Final = 1_754_000_000_000  # 2025-07-31T22:13:20Z; every session starts from here
SHOP: Final = "/home/dev/shop"
DOCS: Final = "/home/dev/docs"
LEGACY: Final = "/home/dev/legacy"

REVIEW_ID: Final = "0198c2a4-7b1e-7c3d-9f00-123456789abc"
COMPACTED_ID: Final = "0198c2a5-1111-7c3d-9f00-00000000c0de"
SUBAGENT_ID: Final = "0198c2a6-2222-7c3d-9f00-0000000005ab"
HANDBOOK_ID: Final = "0198c2a7-3333-7c3d-9f00-000000000d0c"
SCRATCH_ID: Final = "scratch~笔记 #1"
JULY_ID: Final = "0198b001-4444-7c3d-9f00-0000000007e1"
CRASHED_ID: Final = "0198c2a8-5555-7c3d-9f00-00000000dead"

SAMPLE_SESSION_IDS: Final = (
    REVIEW_ID,
    COMPACTED_ID,
    SUBAGENT_ID,
    HANDBOOK_ID,
    SCRATCH_ID,
    JULY_ID,
    CRASHED_ID,
)

_CHECKPOINT_PREAMBLE: Final = (
    "This is an automatically generated checkpoint of the conversation so far. The earlier messages "
    "were summarized to save context; continue from the summary below.\n\n<compacted-summary>"
)


def _request_header(log: SessionLog, model: str = "deepseek-chat") -> None:
    log.append(
        "request/header",
        {
            "header": {
                "config": {"provider": "deepseek", "model": model},
                "system": "You are dsh, a coding agent.",
            },
            "reason": "initial",
        },
    )


def _stream(log: SessionLog, kind: str, text: str, *, index: int, pieces: int = 4) -> None:
    """Stream ``text`` as delta chunks (packed into one row when written)."""
    size = max(1, len(text) // pieces)
    for start in range(0, len(text), size):
        log.chunk(kind, text[start : start + size], index=index)


def _answer(log: SessionLog, reasoning: str, text: str) -> int:
    """One assistant step: streamed reasoning and text, then the final message."""
    log.start_step()
    _stream(log, "reasoning-delta", reasoning, index=0)
    _stream(log, "text-delta", text, index=1)
    seq = log.assistant(
        [{"type": "reasoning", "text": reasoning}, {"type": "text", "text": text}],
        usage={"inputTokens": 1200 + 37 * log.turn, "outputTokens": len(text) // 3, "reasoningTokens": 40},
    )
    log.end_step()
    return seq


def _tool_step(log: SessionLog, call_id: str, name: str, arguments: str, output: str, intro: str) -> None:
    """One assistant step that calls a tool, and the tool's result."""
    log.start_step()
    _stream(log, "text-delta", intro, index=0, pieces=3)
    log.tool_call_delta(call_id, name, arguments)
    log.assistant(
        [
            {"type": "text", "text": intro},
            {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments},
        ]
    )
    call = log.tool_call(call_id, name, arguments)
    log.tool_result(call_id, output, call_seq=call)
    log.end_step()


def _titled(log: SessionLog, title: str) -> SessionLog:
    """End the open turn, then name the session, in one last batch."""
    log.end_turn()
    log.title(title)
    log.commit()
    return log


def _review_session() -> SessionLog:
    """A code review with tool traffic; its title was generated, then renamed twice."""
    log = SessionLog(REVIEW_ID, BASE_TIME + 3_600_000, cwd=SHOP)
    _request_header(log)
    log.commit()
    log.start_turn()
    first = log.user("Review src/cart.ts — totals are off by one cent for some discounts.")
    log.title("Cart totals off by a cent", source={"kind": "fallback"}, message_seqs=[first])
    _tool_step(
        log,
        "call_read_cart",
        "read_file",
        '{"path":"src/cart.ts"}',
        "export function total(items: Item[]): number {\n  return items.reduce((sum, i) => "
        "sum + Math.round(i.price * (1 - i.discount) * 100) / 100, 0)\n}\n",
        "Let me look at the cart code.",
    )
    _answer(
        log,
        "Rounding per item accumulates error; rounding once on the sum in integer cents fixes it.",
        "The bug is per-item rounding: each line is rounded to cents before summing, so three items at "
        "33.335 lose a cent. Sum in integer cents and round once:\n\n```ts\nconst cents = items.reduce("
        "(sum, i) => sum + i.priceCents * (100 - i.discountPct), 0)\n"
        "return Math.round(cents / 100) / 100\n```",
    )
    log.end_turn()
    log.commit()
    log.title(
        "Fix cent rounding in cart totals",
        source={"kind": "provider", "provider": "deepseek", "model": {"id": "deepseek-chat"}},
        message_seqs=[first],
    )
    log.commit()
    log.start_turn()
    log.user("Please also run the tests.")
    _tool_step(
        log,
        "call_run_tests",
        "bash",
        '{"command":"npm test -- cart"}',
        "PASS src/cart.test.ts\n  ✓ rounds once on the total (4 ms)\n\nTests: 12 passed, 12 total",
        "Running the cart tests.",
    )
    _answer(log, "All twelve pass.", "All 12 cart tests pass with the integer-cents total.")
    return _titled(log, "Cart rounding: integer cents")


def _compacted_session() -> SessionLog:
    """A long debugging session whose first turns were compacted into a checkpoint."""
    log = SessionLog(COMPACTED_ID, BASE_TIME + 7_200_000, cwd=SHOP)
    _request_header(log, "deepseek-reasoner")
    surface: list[int] = []
    topics = [
        ("Why does the checkout page flash the old price?", "The price store hydrates after first paint."),
        ("Can we render the price on the server?", "Yes: pass the price through the page props."),
        ("What about cached pages?", "Cached pages carry a stale price; revalidate them every minute."),
    ]
    for question, answer in topics:
        log.start_turn()
        surface.append(log.user(question))
        surface.append(_answer(log, f"Thinking about: {question}", answer))
        log.end_turn()
        log.commit()
    summary_text = (
        "The user is fixing a stale price flash on the checkout page. We found the price store hydrates "
        "after first paint, moved the price into server-rendered page props, and decided cached pages "
        "must revalidate every minute."
    )
    log.compaction("cmp_0198c2a5_0001", summary_text, surface, preamble=_CHECKPOINT_PREAMBLE, tokens=5321)
    log.start_turn()
    log.user("Now add a regression test for the flash.")
    _answer(
        log,
        "A render test can assert the first paint already shows the server price.",
        "Added `checkout.price.test.tsx`: it renders the page with a server price and asserts the first "
        "paint shows it, so a hydration regression fails the test.",
    )
    return _titled(log, "Stale price flash on checkout")


def _subagent_session() -> SessionLog:
    """A delegated search run by the review session."""
    log = SessionLog(
        SUBAGENT_ID,
        BASE_TIME + 3_700_000,
        cwd=SHOP,
        header_extra={"parentSession": REVIEW_ID, "origin": "subagent", "delegationDepth": 1},
    )
    log.start_turn()
    log.user("Find every place that rounds money values.", source={"kind": "delegation", "parent": REVIEW_ID})
    _tool_step(
        log,
        "call_grep_round",
        "grep",
        '{"pattern":"Math.round","path":"src"}',
        "src/cart.ts:2\nsrc/invoice.ts:14\nsrc/tax.ts:8",
        "Searching for rounding calls.",
    )
    _answer(log, "Three hits.", "Money is rounded in src/cart.ts:2, src/invoice.ts:14 and src/tax.ts:8.")
    log.end_turn()
    log.commit()
    return log


def _handbook_session() -> SessionLog:
    """A long writing session: its conversation is far larger than one 64 KiB reference budget."""
    log = SessionLog(HANDBOOK_ID, BASE_TIME + 10_800_000, cwd=DOCS)
    _request_header(log)
    chapters = [
        "installation",
        "configuration",
        "sessions",
        "references",
        "compaction",
        "tools",
        "permissions",
        "subagents",
        "plugins",
        "troubleshooting",
        "upgrading",
        "glossary",
    ]
    for number, chapter in enumerate(chapters, start=1):
        log.start_turn()
        log.user(f"Draft chapter {number} of the handbook: {chapter}. Keep the house style.")
        paragraph = (
            f"Chapter {number} explains {chapter} in dsh. It starts from what a new user sees, walks "
            "through each option with an example, and ends with the mistakes people make most often. "
        )
        log.commit()
        _answer(log, f"Outline {chapter} first.", f"# {number}. {chapter.title()}\n\n" + paragraph * 60)
        log.end_turn()
        log.commit()
    log.title("Handbook drafting")
    log.commit()
    return log


def _scratch_session() -> SessionLog:
    """A note-taking session without a project directory; its id needs escaping on disk."""
    log = SessionLog(SCRATCH_ID, BASE_TIME + 600_000)
    log.start_turn()
    log.user("记一下：周五之前把发布说明写完。")
    _answer(log, "A reminder.", "好的，已记下：周五之前完成发布说明。")
    return _titled(log, "发布说明提醒")


def _july_session() -> SessionLog:
    """A July-era session: the snapshot was baked into the prompt, the person's words kept aside."""
    log = SessionLog(JULY_ID, BASE_TIME - 1_209_600_000, cwd=LEGACY)
    log.start_turn()
    baked = (
        "## Referenced sessions\n\n<referenced-sessions>\n"
        '[{"sessionId":"0198af00-legacy","label":"Old API notes","cwd":"/home/dev/legacy",'
        '"capturedThroughSeq":3,"conversation":[{"role":"user","text":"v1 endpoints?"}]}]\n'
        "</referenced-sessions>\n\nPort the v1 client to the v2 endpoints we discussed."
    )
    log.user(
        baked,
        extra={
            "envelope": {
                "displayContent": [{"type": "text", "text": "Port the v1 client to the v2 endpoints."}]
            }
        },
    )
    _answer(
        log,
        "Map each v1 call to v2.",
        "Ported: `getUser` now calls `/v2/users/:id`; the rest follow the same map.",
    )
    log.end_turn()
    log.commit()
    log.start_turn()
    log.user("Compare with @Cart rounding: integer cents please.")
    log.user(
        "## Referenced sessions\n\n<referenced-sessions>\n[]\n</referenced-sessions>",
        source={"kind": "session-reference", "form": "recall", "version": 1, "references": []},
    )
    _answer(
        log, "Unrelated code paths.", "The client has no money math, so the rounding fix does not apply here."
    )
    return _titled(log, "Port v1 client to v2")


def _crashed_session() -> SessionLog:
    """dsh died mid-tool-call: the log ends inside an open turn (read back with recovery closers)."""
    log = SessionLog(CRASHED_ID, BASE_TIME + 14_400_000, cwd=DOCS)
    log.start_turn()
    log.user("Regenerate the API reference from the OpenAPI file.")
    log.commit()
    log.start_step()
    _stream(log, "text-delta", "Generating the reference now.", index=0, pieces=3)
    log.assistant(
        [
            {"type": "text", "text": "Generating the reference now."},
            {
                "type": "tool-call",
                "id": "call_gen_docs",
                "name": "bash",
                "arguments": '{"command":"make api-docs"}',
            },
        ]
    )
    log.tool_call("call_gen_docs", "bash", '{"command":"make api-docs"}')
    log.commit()
    return log


def sample_logs() -> list[SessionLog]:
    """The sample sessions, oldest first."""
    return [
        _july_session(),
        _scratch_session(),
        _review_session(),
        _subagent_session(),
        _compacted_session(),
        _handbook_session(),
        _crashed_session(),
    ]


def write_sample_store(directory: str | os.PathLike[str], compression: Compression = "zstd") -> str:
    """Write the sample sessions root into ``directory`` (created if needed) and return its path.

    Refuses a directory that already holds anything, so it never adds sessions to a real root.
    """
    root = os.path.abspath(os.fspath(directory))
    os.makedirs(root, exist_ok=True)
    if os.listdir(root):
        raise FileExistsError(f"refusing to write the sample into {root}: it is not empty")
    for log in sample_logs():
        write_session_log(root, log, compression)
    return root


__all__ = ["SAMPLE_SESSION_IDS", "sample_logs", "write_sample_store"]
