"""A person-readable account of a prepared message: what the model receives and what it costs.

Two forms share the accounting (the same figures, written the same way, see :mod:`.display`):

- :func:`render_prepared_report`, what ``dsh-session-reference prepare`` prints: the accounting, then
  both user-role messages exactly as the model receives them, byte for byte;
- :func:`render_readable_report`, the editor's preview: the totals first, then each session with
  its accounting and the messages the model reads of it as text (line breaks, wrapped lines,
  where the budget omits messages), then the readable message.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import ResolverConfig
from .display import GUTTER, display_label, gutter, kilobytes, quoted_lines, share, wrapped
from .jsjson import js_byte_length
from .model import ConversationSnapshot, SurfaceSnapshot
from .resolver import PreparedMessage
from .retention import RetainedSource, conversation_items
from .tokens import BYTES_PER_TOKEN, COUNTER, TokenCount, TokenCounter
from .transcript import model_view

TOKENIZER_WAIT = 5.0
"""Seconds a report waits for DeepSeek's tokenizer to load (once per process) before it estimates."""
RULE = "-" * 72
WHAT_FOLLOWS_THE_GUTTER = (
    f"(each line of a message follows “{GUTTER} ”; what follows it is the model's, byte for byte)"
)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _weight(count: int, tokens: TokenCount) -> str:
    return f"{kilobytes(count)} KB ({count:,} bytes, {tokens.describe()})"


def _source_table(index: int, source: RetainedSource, budget: int) -> list[str]:
    stats = source.stats
    data = source.data
    return [
        f"[{index + 1}] {display_label(data['label'])}",
        f"    session id        {display_label(data['sessionId'])}",
        f"    cwd               {display_label(data['cwd']) if data['cwd'] is not None else '(no cwd)'}",
        f"    captured through  seq {data['capturedThroughSeq']}",
        f"    compacted         {_yes(stats.compacted)}",
        f"    messages          {stats.original_messages} original, {stats.retained_messages} retained, "
        f"{stats.omitted_messages} omitted",
        f"    omitted           {stats.omitted_bytes:,} UTF-8 bytes",
        f"    truncated         {_yes(stats.truncated)}",
        f"    serialized        {share(source.serialized_bytes, budget)}",
    ]


def _totals(prepared: PreparedMessage, readable_text: str, counter: TokenCounter) -> list[str]:
    context = prepared.additional_context
    message_bytes = js_byte_length(readable_text)
    message_tokens = counter.count(readable_text)
    if context is None:
        return [
            "No sessions referenced: the message is sent as it is.",
            f"Message: {_weight(message_bytes, message_tokens)}",
        ]
    snapshot_tokens = counter.count(context.text)
    both = snapshot_tokens + message_tokens
    return [
        "Totals",
        f"    snapshot message  {_weight(context.text_bytes, snapshot_tokens)}",
        f"    readable message  {_weight(message_bytes, message_tokens)}",
        f"    both              {_weight(context.text_bytes + message_bytes, both)}",
        "    (tokens counted by DeepSeek-V4's tokenizer, without dsh's chat framing and system prompt)"
        if both.exact
        else f"    (token counts are estimates: UTF-8 bytes / {BYTES_PER_TOKEN}; "
        "the `tokens` extra counts exactly)",
    ]


def budget_lines(config: ResolverConfig) -> list[str]:
    """The budgets this accounting is made at, each with where it came from (dsh's profile, a
    setting or flag, or dsh's default), so a person can tell it is dsh's own."""
    values = (config.max_references, config.candidate_limit, config.max_reference_bytes)
    names = ("maxReferences", "candidateLimit", "maxReferenceBytes")
    return [
        "Budgets",
        *(
            f"    {name:<18}{value:,} from {display_label(origin)}"
            for name, value, origin in zip(names, values, config.origins, strict=True)
        ),
    ]


def render_accounting(
    prepared: PreparedMessage, config: ResolverConfig, readable_text: str, counter: TokenCounter = COUNTER
) -> list[str]:
    """The byte-accounting table and totals, one line per list item."""
    context = prepared.additional_context
    lines = ["Byte accounting", "==============="]
    if context is not None:
        for index, source in enumerate(context.sources):
            lines += ["", *_source_table(index, source, config.max_reference_bytes)]
        lines.append("")
    return lines + _totals(prepared, readable_text, counter) + ["", *budget_lines(config)]


def render_prepared_report(
    readable_text: str, prepared: PreparedMessage, config: ResolverConfig, *, counter: TokenCounter = COUNTER
) -> str:
    """The accounting first (a snapshot can be 64 KB of one JSON line, and the cost is what a
    reader looks for), then the two user-role messages as the model sees them, in upstream
    0.1.0-rc.8's order: the readable direct message, then the snapshot after it. Each line of a
    message is in the :func:`~.display.gutter`, after which it is the model's byte for byte (a
    message's own line can then not pass for one of this report's); ``prepare --json`` gives
    them bare.

    Blocking: it waits for the tokenizer's load (both callers are one-off, not per keystroke,
    and the language server calls it in a thread), so its counts are exact where they can be.
    ``counter``: the process's, or one that estimates (a test's view of a server without the extra).
    """
    counter.wait(TOKENIZER_WAIT)
    context = prepared.additional_context
    parts = render_accounting(prepared, config, readable_text, counter)
    parts += ["", "What the model receives", "======================", WHAT_FOLLOWS_THE_GUTTER, ""]
    if context is None:
        return "\n".join([*parts, "Message (user)", RULE, *gutter(readable_text), RULE])
    parts += ["Message 1 of 2 (user): your message, with @labels", RULE, *gutter(readable_text), RULE, ""]
    parts += ["Message 2 of 2 (user): referenced-session snapshot", RULE, *gutter(context.text), RULE, ""]
    parts.append("dsh appends the snapshot right after your message.")
    return "\n".join(parts)


def render_readable_report(
    readable_text: str,
    prepared: PreparedMessage,
    config: ResolverConfig,
    snapshots: Sequence[SurfaceSnapshot | ConversationSnapshot],
    exact_text: str,
) -> str:
    """The preview: the totals, then per session its accounting and the messages the model reads
    of it (``snapshots``: each source's read, in reference order), then the readable message.
    ``exact_text`` says where the exact model-facing text is (the JSON itself is not repeated
    here: as one line of up to 64 KB it is for the model, not for reading)."""
    COUNTER.wait(TOKENIZER_WAIT)
    context = prepared.additional_context
    parts = ["Byte accounting", "===============", *_totals(prepared, readable_text, COUNTER)]
    parts += ["", *budget_lines(config)]
    parts += ["", wrapped(exact_text)]
    if context is not None:
        budget = config.max_reference_bytes
        for index, (source, snapshot) in enumerate(zip(context.sources, snapshots, strict=True)):
            view = "\n".join(model_view(conversation_items(snapshot), source)).rstrip("\n").split("\n")
            parts += ["", *_source_table(index, source, budget), "", "    What the model reads of it:", ""]
            parts += [f"    {line}" if line else "" for line in view]
    heading = "Your message (sent first, then the snapshot)" if context is not None else "Your message"
    parts += ["", heading, RULE, *quoted_lines(readable_text), RULE]
    return "\n".join(parts)
