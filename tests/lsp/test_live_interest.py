"""Which sessions the server asks its source to watch on a root too big to watch every log
(:meth:`~dsh_session_reference.lsp.live.Live.analysed`): those the open documents' last finished
analyses read, then served transcripts'. An analysis cancelled by the next keystroke changes
nothing: the sessions watched must not come and go as one types (each change makes the watcher
list and watch the root again)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from dsh_session_reference.lsp.live import Live
from dsh_session_reference.model import StoreChange


class Source:
    """The followed source: records what it is told to watch."""

    def __init__(self) -> None:
        self.told: list[list[str]] = []

    def watch(self, listener: Callable[[StoreChange], None]) -> str | None:
        return None

    def watch_sessions(self, session_ids: Iterable[str]) -> None:
        self.told.append(list(session_ids))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def analysis(loop: asyncio.AbstractEventLoop, *read: str, unlisted: str | None = None) -> asyncio.Future[Any]:
    references = [SimpleNamespace(session_id=session, record=object()) for session in read]
    if unlisted is not None:
        references.append(SimpleNamespace(session_id=unlisted, record=None))
    done: asyncio.Future[Any] = loop.create_future()
    done.set_result(SimpleNamespace(references=references))
    return done


def test_the_sessions_read_are_watched_and_a_cancelled_analysis_changes_nothing(
    loop: asyncio.AbstractEventLoop,
) -> None:
    documents = {"file:///a.md": object(), "file:///b.md": object()}
    live = Live(SimpleNamespace(documents=documents))  # type: ignore[arg-type]
    live.loop = loop
    source = Source()
    live.follow(source)  # type: ignore[arg-type]

    live.analysed("file:///a.md", analysis(loop, "s2", "s1", unlisted="gone"))
    assert source.told == [["s1", "s2"]]  # a session the root does not list has no log to watch
    cancelled: asyncio.Future[Any] = loop.create_future()
    cancelled.cancel()  # the next keystroke's analysis replaced it
    live.analysed("file:///a.md", cancelled)
    live.analysed("file:///b.md", analysis(loop, "s1"))  # already watched: nothing to tell
    assert source.told == [["s1", "s2"]]
    live.analysed("file:///a.md", analysis(loop, "s3"))
    assert source.told[-1] == ["s3", "s1"]
    live.served("dsh-transcript:/T.txt?s9", "s9")
    assert source.told[-1] == ["s3", "s1", "s9"]
    del documents["file:///a.md"]  # closed: its sessions are let go at the next change
    live.analysed("file:///b.md", analysis(loop, "s1"))
    assert source.told[-1] == ["s1", "s9"]
