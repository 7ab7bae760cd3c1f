"""Whether a mention reads as the session it sends: the pure decision behind the ``stale-label`` and
``unreadable-label`` warnings (issue 35: ``@[Harmless refactor](<the secrets session>)`` read as
``@Harmless refactor`` while the model received the secrets session)."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from dsh_session_reference import labels
from dsh_session_reference.analysis import quoted
from dsh_session_reference.display import UNSEEN, display_label, legible, unseen
from dsh_session_reference.labels import is_current_label, own_label, unreadable_part


def test_a_sessions_own_label_is_upstreams_candidate_label() -> None:
    assert own_label("Customer export (secrets)", "s-1") == "Customer export (secrets)"
    assert own_label(None, "s-1") == "s-1"  # untitled: the id, as upstream labels the candidate
    assert own_label("", "s-1") == ""  # an empty title is a title


@pytest.mark.parametrize(
    ("label", "own", "current"),
    [
        ("Customer export (secrets)", "Customer export (secrets)", True),
        ("Harmless refactor", "Customer export (secrets)", False),
        ("s-1", "Customer export (secrets)", False),  # the id of a titled session is not its label
        ("s-1", "s-1", True),
        ("Harmless refactor", "s-1", False),  # an untitled session labelled as anything but its id
        (None, "s-1", False),
        ("a\\x1bb", "a\x1bb", True),  # inserted as upstream's TUI escapes it
        ("a\x1bb", "a\x1bb", True),  # or as dsh wrote it
        (display_label("x" * 500), "x" * 500, True),  # inserted shortened
        ("x" * 199 + "y", "x" * 500, False),
    ],
)
def test_a_label_is_current_only_as_the_session_is_labelled(
    label: str | None, own: str, current: bool
) -> None:
    assert is_current_label(label, own) is current


def test_a_sessions_labels_are_escaped_once_for_all_its_mentions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quick fixes over a document ask for each mention of a session; each asking escaped its whole
    title again (a 2 MB title: 12 ms a mention, two minutes for 10,000 of them on the event loop)."""
    escaped: list[str] = []

    def counted(text: str) -> str:
        escaped.append(text)
        return text

    monkeypatch.setattr(labels, "display_inline_text", counted)
    title = "t" * (2 << 20) + " (no other test labels this session)"
    assert not any(is_current_label("old", title) for _ in range(1000))
    assert len(escaped) == 1


@pytest.mark.parametrize(
    ("label", "found"),
    [
        ("Harmless refactor", None),
        ("Fix @types and [brackets] (really)", None),
        ("界 😀 é", None),
        ("Harmless \u202e)sterces( tropxe", "U+202E"),  # right-to-left override
        ("Harm\u200bless", "U+200B"),  # zero-width space
        ("Harmless\u2066 refactor\u2069", "U+2066"),  # isolate
        ("Harmless\nrefactor", "U+000A"),
        ("Harmless\u2028refactor", "U+2028"),
        ("Harmless\ufeff", "U+FEFF"),
        ("Harmless\U000e0041", "U+E0041"),  # a tag character
        ("Harmless\u3164", "U+3164"),  # a blank filler
        ("x](dsh-session:IkN1c3RvbWVyIg) and @[y", "'dsh-session:'"),
        ("see DSH-SESSION:abc", "'dsh-session:'"),
    ],
)
def test_what_a_chip_would_not_show_as_itself(label: str, found: str | None) -> None:
    part = unreadable_part(label)
    assert (part is None) if found is None else (part is not None and found in part), part


def test_every_invisible_format_or_control_character_is_unseen() -> None:
    """Every code point Unicode calls a control (Cc), a format character (Cf) or a line or
    paragraph separator (Zl, Zp) is matched, whatever Unicode version a future Python brings."""
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp") and not UNSEEN.fullmatch(chr(code))
    ]
    assert missed == []


def test_messages_and_hints_name_labels_with_nothing_hidden() -> None:
    shown = quoted("Harmless \u202e)sterces(\u200b\x1b")
    assert not UNSEEN.search(shown) and "\\\\u{202e}" in shown and "\\\\x1b" in shown
    assert legible("a\u2066b") == "a\\u{2066}b" and unseen("a\u2066b") == "U+2066"
    assert legible("x" * 500, 60) == "x" * 59 + "…"
