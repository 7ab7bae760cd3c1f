"""A person-readable account of a prepared message: what the model receives and what it costs.

Shared by ``dsh-session-reference prepare`` and the language server's preview
document, so a terminal and an editor show the same figures.
"""

from __future__ import annotations

import json

from .config import ResolverConfig
from .display import display_label
from .jsjson import js_byte_length
from .resolver import PreparedMessage
from .snapshot import PROMPT_PREFIX, PROMPT_SUFFIX
from .tokens import BYTES_PER_TOKEN, COUNTER, TokenCounter

TOKENIZER_WAIT = 5.0
"""Seconds a report waits for DeepSeek's tokenizer to load (once per process) before it estimates."""


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def render_accounting(
    prepared: PreparedMessage, config: ResolverConfig, readable_text: str, counter: TokenCounter = COUNTER
) -> list[str]:
    """The byte-accounting table and totals, one line per list item."""
    context = prepared.additional_context
    lines = ["Byte accounting", "==============="]
    message_bytes = js_byte_length(readable_text)
    if context is None:
        lines.append("No sessions referenced: the message is sent as it is.")
        lines.append(f"Message: {message_bytes} bytes ({counter.count(readable_text).describe()})")
        return lines
    budget = config.max_reference_bytes
    for index, source in enumerate(context.sources):
        stats = source.stats
        data = source.data
        lines += [
            "",
            f"[{index + 1}] {display_label(data['label'])}",
            f"    session id        {display_label(data['sessionId'])}",
            f"    cwd               {display_label(data['cwd']) if data['cwd'] is not None else '(no cwd)'}",
            f"    captured through  seq {data['capturedThroughSeq']}",
            f"    compacted         {_yes(stats.compacted)}",
            f"    messages          {stats.original_messages} original, {stats.retained_messages} retained, "
            f"{stats.omitted_messages} omitted",
            f"    omitted           {stats.omitted_bytes} UTF-8 bytes",
            f"    truncated         {_yes(stats.truncated)}",
            f"    serialized        {source.serialized_bytes} of {budget} bytes "
            f"({100 * source.serialized_bytes / budget:.1f}% of maxReferenceBytes)",
        ]
    snapshot_bytes = context.text_bytes
    total = snapshot_bytes + message_bytes
    snapshot_tokens = counter.count(context.text)
    message_tokens = counter.count(readable_text)
    both = snapshot_tokens + message_tokens
    lines += [
        "",
        "Totals",
        f"    snapshot message  {snapshot_bytes} bytes ({snapshot_tokens.describe()})",
        f"    readable message  {message_bytes} bytes ({message_tokens.describe()})",
        f"    both              {total} bytes ({both.describe()})",
        "    (tokens counted by DeepSeek-V4's tokenizer, without dsh's chat framing and system prompt)"
        if both.exact
        else f"    (token counts are estimates: UTF-8 bytes / {BYTES_PER_TOKEN}; "
        "the `tokens` extra counts exactly)",
    ]
    return lines


def render_prepared_report(
    readable_text: str,
    prepared: PreparedMessage,
    config: ResolverConfig,
    *,
    for_reading: bool = False,
    counter: TokenCounter = COUNTER,
) -> str:
    """The accounting first (a snapshot can be 64 KB of one JSON line, and the cost is
    what a reader looks for), then the two user-role messages as the model sees them, in
    upstream 0.1.0-rc.8's order: the readable direct message, then the snapshot after it.

    ``for_reading`` (the editor's preview) shows the snapshot's data pretty-printed and says
    so, with the size of the compact form the model receives; without it (the CLI) the
    snapshot is shown exactly, byte for byte.

    Blocking: it waits for the tokenizer's load (both callers are one-off, not per keystroke,
    and the language server calls it in a thread), so its counts are exact where they can be.
    ``counter``: the process's, or one that estimates (a test's view of a server without the extra).
    """
    counter.wait(TOKENIZER_WAIT)
    context = prepared.additional_context
    rule = "-" * 72
    parts = render_accounting(prepared, config, readable_text, counter)
    parts += ["", "What the model receives", "======================", ""]
    if context is not None:
        parts += ["Message 1 of 2 (user): your message, with @labels", rule, readable_text, rule, ""]
        if for_reading:
            parts += [
                "Message 2 of 2 (user): referenced-session snapshot, PRETTY-PRINTED FOR READING.",
                f"The model receives it compact, its data on one line: {context.text_bytes} bytes "
                "(`dsh-session-reference prepare` prints that exact form).",
                rule,
                readable_snapshot(context.text),
                rule,
                "",
            ]
        else:
            parts += ["Message 2 of 2 (user): referenced-session snapshot", rule, context.text, rule, ""]
        parts.append("dsh appends the snapshot right after your message.")
    else:
        parts += ["Message (user)", rule, readable_text, rule]
    return "\n".join(parts)


def readable_snapshot(prompt: str) -> str:
    """The snapshot prompt with its data (the JSON line between the framing) indented for a
    person. Still valid JSON for the same data, ``<`` still ``\\u003c``: only the white space
    differs from what the model receives."""
    if not (prompt.startswith(PROMPT_PREFIX) and prompt.endswith(PROMPT_SUFFIX)):
        return prompt
    data = json.loads(prompt[len(PROMPT_PREFIX) : len(prompt) - len(PROMPT_SUFFIX)])
    pretty = json.dumps(data, indent=2, ensure_ascii=False).replace("<", "\\u003c")
    return PROMPT_PREFIX + pretty + PROMPT_SUFFIX
