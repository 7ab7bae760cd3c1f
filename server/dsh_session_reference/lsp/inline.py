"""Each mention's cost in the text: inlay hints after mentions, a code lens over the first.

Both read the document's one :class:`~..analysis.Analysis`, whose retention is ``prepare``'s own
(:func:`~..resolver.SessionReferenceResolver.render_sources`), so a hint never disagrees with the
preview or the diagnostics: no second rule decides what a mention costs.
"""

from __future__ import annotations

from typing import Any, Final

from lsprotocol import types

from ..analysis import Analysis
from ..display import kilobytes, legible
from ..labels import STALE_LABEL, misleading_labels, own_label
from ..lines import Encoding
from ..tokens import TokenCount
from .hover import cost_line
from .positions import LineIndex

HINT_TITLE_CHARS: Final = 60
"""The most characters of a title a hint names (a hint shares its row with the prompt's text)."""


def inlay_hints(
    analysis: Analysis, index: LineIndex, encoding: Encoding, start: int, end: int
) -> list[types.InlayHint]:
    """After each mention of a session ``prepare`` would include, in ``[start, end]``: what that
    session costs (``12 msgs · 5.8 / 64 KB``, ``· truncated`` when retention cut it); after a
    repeated mention, that it is counted once. A mention whose label is not its session's own
    (a ``stale-label`` warning) says first which session it sends: ``sends “Title” · …``."""
    hints: list[tuple[int, types.InlayHint]] = []
    for reference in analysis.references:
        retained = reference.retained
        if retained is None or reference.self_reference:
            continue
        # Made once per session, shared by its mentions (a title per hint multiplied a 300 KB
        # title by 2,000 mentions into a 572 MB answer).
        title = legible(reference.title if reference.title is not None else reference.label)
        once = f"{title} is mentioned above: prepare includes it once"
        misleading = misleading_labels(reference.title, reference.session_id, reference.spans)
        relabelled = {start for start, (code, _) in misleading.items() if code == STALE_LABEL}
        sends = f"sends “{legible(own_label(reference.title, reference.session_id), HINT_TITLE_CHARS)}” · "
        for number, span in enumerate(reference.spans):
            if not start <= span.end <= end:
                continue
            if number == 0:
                from ..transcript import cost_label  # at the first mention, not at the server's start

                label = cost_label(retained, analysis.max_reference_bytes)
                tooltip = f"{title}: {cost_line(retained, analysis.max_reference_bytes, reference.tokens)}"
            else:
                label, tooltip = "counted once", once
            if span.start in relabelled:
                label = sends + label
            hint = types.InlayHint(
                position=index.position_at(span.end, encoding),
                label=label,
                padding_left=True,
                tooltip=tooltip,
            )
            hints.append((span.end, hint))
    return [hint for _, hint in sorted(hints, key=lambda pair: pair[0])]


def code_lenses(
    analysis: Analysis,
    index: LineIndex,
    encoding: Encoding,
    summary: dict[str, Any],
    preview: types.Command,
) -> list[types.CodeLens]:
    """On the first mention's line: the message's total (or that ``prepare`` would fail) and
    "Preview", both opening the preview (``preview``: the command a client runs for it)."""
    if not analysis.spans:
        return []
    first = min(span.start for span in analysis.spans)
    line = index.position_at(first, encoding).line
    where = types.Range(
        start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)
    )
    command, arguments = preview.command, preview.arguments
    return [
        types.CodeLens(range=where, command=types.Command(title, command, arguments=arguments))
        for title in (_total(summary), "Preview")
    ]


def _total(summary: dict[str, Any]) -> str:
    """``3 sessions · 18.2 KB in all (4,612 tokens)`` (``~4,612 tokens, estimated`` without DeepSeek's
    tokenizer), or the errors that stop it."""
    errors = summary["errors"]
    if summary["bytes"] is None:
        return f"dsh would not send this: {errors} error{'' if errors == 1 else 's'}"
    sessions = summary["sessions"]
    tokens = TokenCount(summary["tokens"], summary["tokensExact"])
    return (
        f"{sessions} session{'' if sessions == 1 else 's'} · {kilobytes(summary['bytes'])} KB in all "
        f"({tokens.describe()})"
    )
