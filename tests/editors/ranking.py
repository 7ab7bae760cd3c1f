"""Sessions and queries that tell dsh's ranking from an editor's own, shared by the editor tests."""

from __future__ import annotations

from pathlib import Path

from dsh_session_reference.display import display_inline_text
from dsh_session_reference.resolver import SessionReferenceResolver, agent_for_target
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.store.writer import SessionLog, write_session_log

RANKING_QUERIES = ("mig", "Mig", "文档", "dry", "dry run", "zeta mig")
"""Queries whose server rank an editor's own fuzzy ranking would change (see ``ranking_sessions``)."""


def ranking_sessions(root: Path, target_cwd: str) -> None:
    """Sessions an editor's own fuzzy ranking would put in another order than dsh's.

    dsh ranks the target's cwd first, then sessions without a cwd, then the rest, newest first
    within each; a fuzzy scorer prefers a title that starts with the query. So the target's
    project holds the oldest titles with the query inside them, sessions without a cwd start with
    it in lower case, and the Chinese titles do the same for ``文档``.
    """
    rows = [
        (target_cwd, 1, "Notes: zeta mig follow-up"),
        (target_cwd, 2, "翻译文档的术语表"),
        (None, 3, "migrate the orders table"),
        (None, 4, "mig checklist"),
        (None, 5, "文档迁移"),
        ("/home/dev/other", 6, "dry run of the migration"),
        ("/home/dev/other", 7, "文档 dry cleaning"),
    ]
    for number, (cwd, days, title) in enumerate(rows):
        titled_session(root, f"0198aaaa-0000-7000-8000-{number:012d}", days, cwd, title)


def titled_log(session_id: str, days_old: int, cwd: str | None, title: str) -> SessionLog:
    """One real-format session, ``days_old`` days before :data:`RANKING_BASE`, asked about ``title``."""
    log = SessionLog(session_id, RANKING_BASE - days_old * 86_400_000, cwd=cwd)
    log.commit()
    log.start_turn()
    first = log.user(f"Please look into: {title}")
    log.title(title, message_seqs=[first])
    log.end_turn()
    log.commit()
    return log


def titled_session(root: Path, session_id: str, days_old: int, cwd: str | None, title: str) -> None:
    """:func:`titled_log`, written under ``root``."""
    write_session_log(root, titled_log(session_id, days_old, cwd, title))


RANKING_BASE = 1_753_900_000_000
"""2025-07-30: around the sample store's own sessions."""


async def ranked_for(root: Path, target_id: str | None, cwd: str, query: str) -> list[str]:
    """The labels ``@query`` lists, in dsh's rank order, as an editor row shows them."""
    store = JsonlSessionStore(str(root))
    agent = await agent_for_target(store, target_id, cwd)
    candidates = await SessionReferenceResolver(store).list_candidates(agent, query)
    return [display_inline_text(candidate.label) for candidate in candidates]


ARCHIVE_CWD = "/home/dev/archive"


BACKLOG_CWD = "/srv/backlog"


def backlog_sessions(root: Path, count: int) -> None:
    """``count`` sessions older than every other, in a project of their own, whose titles, ids and
    folder match none of the queries the editors type: they make the store as big as a user's
    (the issue's 3,000 sessions) without moving any row the tests expect."""
    for number in range(count):
        title = f"Backlog item {number:04d}"
        titled_session(root, f"0198eeee-0000-7000-8000-{number:012d}", 400 + number % 300, BACKLOG_CWD, title)


def archive_sessions(root: Path, count: int) -> list[str]:
    """``count`` old sessions in one more project, oldest last: past the ``candidateLimit`` (50) of
    a list that is not searched again, only a server query reaches the oldest. Their titles."""
    titles = [f"Archived note {number:03d}" for number in range(1, count + 1)]
    for number, title in enumerate(titles, start=1):
        titled_session(root, f"0198bbbb-0000-7000-8000-{number:012d}", 100 + number, ARCHIVE_CWD, title)
    return titles
