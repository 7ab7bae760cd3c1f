"""What the preview's model-facing text shows, and what dsh then sent the model, as the same kind
of thing: the user-role messages of one turn, byte for byte."""

from __future__ import annotations

from dsh_session_reference.report import RULE

from .model import SNAPSHOT_START, Recorded, is_human, message_text


def shown_messages(model_text: str) -> list[str]:
    """The user-role messages the model-facing text shows, byte for byte (``render_prepared_report``)."""
    one = f"Message (user)\n{RULE}\n"
    if one in model_text:
        return [model_text[model_text.index(one) + len(one) : model_text.rindex(f"\n{RULE}\n")]]
    first = f"Message 1 of 2 (user): your message, with @labels\n{RULE}\n"
    second = f"\n{RULE}\n\nMessage 2 of 2 (user): referenced-session snapshot\n{RULE}\n"
    end = f"\n{RULE}\n\ndsh appends the snapshot right after your message."
    start = model_text.index(first) + len(first)
    middle = model_text.index(second, start)
    return [model_text[start:middle], model_text[middle + len(second) : model_text.rindex(end)]]


def sent_messages(request: Recorded) -> list[str]:
    """The user messages of the turn dsh sent: the newest human message and the snapshot after it
    (dsh's own runtime-context message, which the product does not make, left out)."""
    users = [m for m in request.messages if m.get("role") == "user"]
    newest = max(i for i, m in enumerate(users) if is_human(m))
    turn = [message_text(users[newest])]
    if newest + 1 < len(users) and message_text(users[newest + 1]).startswith(SNAPSHOT_START):
        turn.append(message_text(users[newest + 1]))
    return turn
