"""The transcript's text, a pure function of one bounded read: the budget's omissions fenced where
they begin and end, checkpoints marked, what the read did not keep named with its size."""

from __future__ import annotations

from dsh_session_reference.display import kilobytes
from dsh_session_reference.model import ConversationSnapshot, SessionRecord
from dsh_session_reference.projection import ConversationItem, LongText
from dsh_session_reference.retention import bounded_text, item_json_bytes, retain_referenced_session
from dsh_session_reference.transcript import (
    MAX_CHARS,
    cost_label,
    render_transcript,
)

RECORD = SessionRecord("s-1", 1_780_000_000_000, "/home/dev/shop", {"version": 0, "id": "s-1"})


def item(role: str, text: str, checkpoint: bool = False) -> ConversationItem:
    return ConversationItem(role, text, checkpoint, text)  # type: ignore[arg-type]


def render(items: list[ConversationItem], budget: int, max_bytes: int = 1 << 20) -> str:
    snapshot = ConversationSnapshot(RECORD, 12, items, max_bytes)
    retained = retain_referenced_session(snapshot, "Shop", budget)
    return render_transcript(snapshot, "Shop\x1b[1m", retained, budget)


def test_kilobytes_and_the_hint_label() -> None:
    # The VS Code status bar writes sizes the same way (test_vscode.py compares every size below 1 MiB).
    table = {
        0: "0",
        512: "0.5",
        1024: "1",
        1280: "1.2",  # an exact tie rounds to even
        1331: "1.3",
        4321: "4.2",
        5939: "5.8",
        62_589: "61.1",
        65_536: "64",
        102_400: "100",
        102_912: "100",
        1_048_575: "1,024",  # thousands grouped, as every size is written
        2_097_152: "2,048",
        250_000: "244",
    }
    assert {size: kilobytes(size) for size in table} == table
    snapshot = ConversationSnapshot(RECORD, 3, [item("user", "hi"), item("assistant", "hello")], 65_536)
    retained = retain_referenced_session(snapshot, "Shop", 65_536)
    assert retained is not None
    assert cost_label(retained, 65_536) == f"2 msgs · {kilobytes(retained.serialized_bytes)} / 64 KB"


def test_the_header_and_the_messages_newest_last() -> None:
    text = render([item("user", "first question"), item("assistant", "first answer")], 65_536)
    lines = text.splitlines()
    assert lines[1] == "title:     Shop\\x1b[1m"  # controls shown escaped, as everywhere
    assert "cwd:       /home/dev/shop" in lines
    assert "events:    through seq 12" in lines
    assert "messages:  1 from the user, 1 reply" in lines
    assert lines[-2:] == ["── 2 · assistant ──", "│ first answer"]  # message text in the gutter
    assert "budget omits" not in text
    assert lines[7] == "mention:   keeps 2 of 2 messages"
    assert lines[8] == "           0.2 KB of 64 KB (181 of 65,536 bytes, 0.3%)"
    assert lines[9] == "           for a mention labelled with its title"


def test_the_header_fits_the_pane_beside_a_prompt() -> None:
    """VS Code opens a transcript beside the prompt, about 60 columns wide, and does not wrap
    plain text: each fact has its own short line (a long first line hid the sizes)."""
    long = bounded_text("assistant", "x" * 90_000, 4096)
    items = [item("user", "q"), ConversationItem("assistant", long, False, long)]
    snapshot = ConversationSnapshot(RECORD, 12, items, 4096)
    retained = retain_referenced_session(snapshot, "shop work", 4096)
    assert retained is not None and retained.stats.truncated
    text = render_transcript(snapshot, "Shop", retained, 4096, "shop work")
    header = text.split("\n\n", 1)[0].splitlines()
    assert header[0] == "dsh session transcript (read-only)"
    assert header[-2].startswith("           omits ") and header[-2].endswith(" bytes of text")
    assert header[-1] == '           for a mention labelled "shop work"'
    assert max(len(line) for line in header) <= 60, header


def test_what_the_budget_omits_is_fenced_and_a_checkpoint_inside_is_kept() -> None:
    items = [
        item("user", "old " * 100),
        item("user", "summary so far", checkpoint=True),
        item("assistant", "older reply " * 30),
        item("user", "recent question"),
        item("assistant", "recent answer"),
    ]
    budget = 600
    text = render(items, budget)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "budget omits" in line)
    end = lines.index("════ end of what the budget omits ════")
    assert start < lines.index("── 1 · user ──") < end
    assert (
        start < lines.index("── 2 · checkpoint (user) · kept: the budget never omits a checkpoint ──") < end
    )
    assert lines.index("── 3 · assistant ──") < end < lines.index("── 4 · user ──")
    assert "omits 2 messages" in lines[start]


def test_a_message_the_read_did_not_keep_is_a_gap_with_its_size() -> None:
    gone = LongText(b"", b"", 5000, item_json_bytes("user", "x" * 5000), evicted=True)
    long = LongText(b"head", b"tail", 90_000, item_json_bytes("user", "x" * 90_000))
    items = [
        ConversationItem("user", gone, False, gone),
        ConversationItem("assistant", gone, False, gone),
        ConversationItem("user", long, False, long),
        item("assistant", "done"),
    ]
    text = render(items, 65_536, max_bytes=65_536)
    assert "[… 2 messages (10,000 bytes) not shown: a transcript shows a session's first 64 KB" in text
    assert "│ head\n[… 89,992 bytes of this message not shown …]\n│ tail" in text
    assert text.index("budget omits 3 messages") < text.index("head\n[…")  # all but the newest go


def test_a_message_retention_cuts_says_how_much_of_it_the_model_gets() -> None:
    long = bounded_text("assistant", "x" * 90_000, 4096)
    text = render([item("user", "q"), ConversationItem("assistant", long, False, long)], 4096, 4096)
    heading = next(line for line in text.splitlines() if line.startswith("── 2 · assistant"))
    assert "· the budget keeps " in heading and "of 90,000 bytes of it ──" in heading


def test_a_transcript_of_many_checkpoints_is_bounded() -> None:
    """Checkpoints are all kept, as prepare keeps them: 400 of 60 KB made a 24 MB transcript. Past
    MAX_CHARS its middle is cut at line breaks, and a notice says how much."""
    items = [item("user", f"checkpoint {n}\n" + "c" * 60_000, checkpoint=True) for n in range(400)]
    text = render([*items, item("assistant", "the last reply")], 65_536, max_bytes=1 << 20)
    assert len(text) <= MAX_CHARS + 200
    assert text.startswith("dsh session transcript") and text.endswith("the last reply\n")
    notice = next(line for line in text.splitlines() if "of this transcript not shown" in line)
    assert notice.startswith("[… ") and "a transcript is at most 2 MB long" in notice
