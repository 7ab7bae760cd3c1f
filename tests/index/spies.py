"""Seams for watching the index at work: how many logs it replays, which it probes itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from dsh_session_reference.store.index import walk as walk_module
from dsh_session_reference.store.index.store import IndexedSessionStore


class CountingStore(IndexedSessionStore):
    """Counts the log replays it makes (the reads the index exists to spare)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replays = 0
        replay: Callable[..., Any] = self.replay

        def counted(*replay_args: Any, **replay_kwargs: Any) -> Any:
            self.replays += 1
            return replay(*replay_args, **replay_kwargs)

        self.replay = counted  # type: ignore[method-assign]


def slow_probes(monkeypatch: pytest.MonkeyPatch, delay: float = 0.02) -> list[str]:
    """Make this process's walks read each unindexed log slowly (worker processes, which import
    the module afresh, stay fast) and record the logs they read."""
    probed: list[str] = []
    probe = walk_module.probe

    def slow(root: str, scan: Any, real: str, segment: str, path: str, *args: Any) -> Any:
        probed.append(path)
        time.sleep(delay)
        return probe(root, scan, real, segment, path, *args)

    monkeypatch.setattr(walk_module, "probe", slow)
    return probed
