"""The tasks a worker process runs: the program of every child :mod:`..workers` starts.

Each is the uncached store's own reading, so a row a worker makes is the row the walk would have
made; each checks the log's fingerprint around its read (:func:`.rows.stable_read`), and a read
of a log that changed meanwhile is not kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from ...model import ConversationRead, ConversationSnapshot, SessionRecord
from ..jsonl_store import JsonlSessionStore
from ..layout import PLAIN_NAME, ZSTD_NAME
from ..listing import Skips, Walk
from ..workers import serve_process
from .bodies import message_text
from .records import Verified, kept_read, read_texts
from .rows import Fingerprint
from .store import IndexedSessionStore
from .title_scan import scan_last_title
from .walk import probe, single_log


def verify_titles(root: str, records: Sequence[SessionRecord]) -> list[Verified]:
    """Title observations of listed logs, read as the uncached store reads them (runs in a worker
    process)."""
    store = JsonlSessionStore(root)
    return [kept_read(str(record.location), partial(store.read_title, record, None)) for record in records]


def read_conversation(root: str, session_id: str, read: ConversationRead) -> ConversationSnapshot:
    """:meth:`IndexedSessionStore.read_conversation` without an index (runs in a worker process:
    locating one session and replaying its log never touch the index)."""
    return IndexedSessionStore(root, persistent=False).read_conversation(session_id, read)


def read_headers(
    root: str, directories: Sequence[tuple[str, str]]
) -> list[tuple[str, Fingerprint, int, str]]:
    """Index listing entries ``(log, fingerprint, read at, text)`` for session directories the index
    has never seen, as the walk would make them (runs in a worker process)."""
    skips = Skips(report=False)  # the walk that takes these reports each problem
    root_real = os.path.realpath(root)
    found: list[tuple[str, Fingerprint, int, str]] = []
    for segment, directory in directories:
        single = single_log((directory + ZSTD_NAME, directory + PLAIN_NAME))
        if single is None:
            continue
        path, fp = single
        entry = probe(root, Walk(skips), root_real, segment, path, fp, None)
        if entry is not None:  # the text travels; the walk's process parses it into the row
            found.append((path, fp, entry[0], entry[1]))
    return found


TASKS: Final[Mapping[str, Callable[..., Any]]] = {
    "read_headers": read_headers,
    "verify_titles": verify_titles,
    # ``(root, paths)``: each log's last ``session/title`` by a byte scan (what a claimed title is
    # checked against, :meth:`..titles.TitleBoard.prove`), or its message text (body search)
    "scan_titles": partial(read_texts, read=scan_last_title),
    "message_texts": partial(read_texts, read=message_text),
    "read_conversation": read_conversation,
}
"""What a worker process may be asked to run, by name, with plain data."""


def main() -> None:
    """A worker process's program (:data:`..workers._BOOT` runs it)."""
    serve_process(TASKS)
