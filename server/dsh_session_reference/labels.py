"""Whether a mention reads as the session it sends: the label it carries against the session's own

A chip shows a mention's label, and the model receives the session its URI names: a label that is
not that session's own (its title, else its id, as upstream labels a candidate), or one holding
what a person would not see as itself, would make the two differ. Pure; :mod:`.analysis` turns the
verdicts into warnings, and the language server keeps such mentions from being drawn as chips.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Final

from .display import display_inline_text, display_label, unseen
from .uri import SESSION_REFERENCE_SCHEME, MentionSpan

STALE_LABEL: Final = "stale-label"
"""The diagnostic code of a label that is not its session's own."""
UNREADABLE_LABEL: Final = "unreadable-label"
"""The diagnostic code of a label that holds what a chip would not show as itself."""


def own_label(title: str | None, session_id: str) -> str:
    """The label a session's mention is made with: upstream's candidate label, its title, else
    its id."""
    return session_id if title is None else title


@lru_cache(maxsize=16)
def current_labels(own: str) -> frozenset[str]:
    """Every label that is :func:`own_label` as a mention carries it: as dsh wrote it, or as a
    mention is inserted (escaped, and shortened when it is long). Made once per session: escaping
    a 2 MB title takes about 12 ms, and a quick-fix request over a document asks it for every one
    of that session's mentions (:func:`is_current_label`)."""
    return frozenset((own, display_inline_text(own), display_label(own)))


def is_current_label(label: str | None, own: str) -> bool:
    """Whether a mention's label is the session's own (:func:`own_label`)."""
    return label in current_labels(own)


def unreadable_part(label: str) -> str | None:
    """What a chip of this label would show as other than it is, if anything: a character a person
    does not see as itself (a line break, a bidi override, a zero-width space), or a session URI,
    which would read as a second mention."""
    hidden = unseen(label)
    if hidden is not None:
        return f"the character {hidden}, which does not show as itself"
    if SESSION_REFERENCE_SCHEME in label.casefold():
        return f"the text {SESSION_REFERENCE_SCHEME!r}, which reads as another mention"
    return None


def misleading_labels(
    title: str | None, session_id: str, spans: Iterable[MentionSpan]
) -> dict[int, tuple[str, str | None]]:
    """Each Markdown mention of a session (by its start; ``title``: its title, if it has one) whose
    label would make a chip read as other than the session it sends: ``(STALE_LABEL, None)`` for a
    label that is not the session's own, ``(UNREADABLE_LABEL, what)`` for one
    :func:`unreadable_part` finds ``what`` in. The one decision behind the warnings, the hints'
    ``sends “…”`` and which links may become chips."""
    current = current_labels(own_label(title, session_id))
    unreadable: dict[str, str | None] = {}
    found: dict[int, tuple[str, str | None]] = {}
    for span in spans:
        label = span.label
        if span.kind != "markdown" or label is None:
            continue
        if label not in current:
            found[span.start] = (STALE_LABEL, None)
            continue
        if label not in unreadable:
            unreadable[label] = unreadable_part(label)
        part = unreadable[label]
        if part is not None:
            found[span.start] = (UNREADABLE_LABEL, part)
    return found
