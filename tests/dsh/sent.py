"""What the preview's model-facing text shows, and what dsh then sent the model, as the same kind
of thing: the user-role messages of one turn, byte for byte."""

from __future__ import annotations

from dsh_session_reference.display import GUTTER
from dsh_session_reference.report import RULE

from .model import SNAPSHOT_START, Recorded, is_human, message_text


def shown_messages(model_text: str) -> list[str]:
    """The user-role messages the model-facing text shows (``render_prepared_report``: the CLI's
    ``prepare`` and the server's model text), each the lines between two rules after "What the model
    receives", with the gutter every line of a message follows taken off: what is left is the
    model's text byte for byte (a ``\r`` in a message would come back as a line break: the tests'
    messages have none)."""
    tail = model_text.split("What the model receives\n", 1)[1]
    pieces = tail.split(f"\n{RULE}\n")
    # heading, message, blank + heading, message, ...: every second piece is a message
    return ["\n".join(_ungutter(line) for line in piece.split("\n")) for piece in pieces[1::2]]


def _ungutter(line: str) -> str:
    assert line.startswith(GUTTER), f"a message line outside the gutter: {line!r}"
    return line.removeprefix(GUTTER).removeprefix(" ")


def sent_messages(request: Recorded) -> list[str]:
    """The user messages of the turn dsh sent: the newest human message and the snapshot after it
    (dsh's own runtime-context message, which the product does not make, left out)."""
    users = [m for m in request.messages if m.get("role") == "user"]
    newest = max(i for i, m in enumerate(users) if is_human(m))
    turn = [message_text(users[newest])]
    if newest + 1 < len(users) and message_text(users[newest + 1]).startswith(SNAPSHOT_START):
        turn.append(message_text(users[newest + 1]))
    return turn
