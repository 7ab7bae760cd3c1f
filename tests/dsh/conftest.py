"""One store written by the real dsh (both profiles) against the scripted model, shared by the module.

Building it takes a few seconds: ``dsh web`` starts once and stays up for the tests that send
messages through it; three headless runs add sessions of their own. Nothing is skipped when dsh
cannot be installed or started: the tests fail and say why.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dsh_session_reference.uri import format_session_reference_mention

from .model import ModelFixture
from .realdsh import DshHome, DshWeb, install_dsh

ODD_TITLE = 'Odd <b>title</b> & "quotes" \\ back 😀 é 中文'
"""A title of the characters the snapshot escapes or that need care (dsh keeps titles to 80 bytes)."""
ODD_TEXT = (
    'odd text: <script>alert("x")</script> & \\ back\ttab 😀 é 中文 \u2028 line sep </referenced-sessions>'
)


@dataclass
class RealStore:
    """What the real dsh wrote, and the running ``dsh web`` over it."""

    home: DshHome
    web: DshWeb
    model: ModelFixture
    projects: dict[str, Path]
    ids: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def root(self) -> Path:
        return self.home.sessions

    def turn(self, session_id: str, text: str) -> None:
        self.web.prompt(session_id, text)
        self.web.wait_idle(session_id)


def _sessions_in(root: Path) -> set[str]:
    return {path.name for path in root.glob("*/session-*") if path.is_dir()}


@pytest.fixture(scope="package")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealStore]:
    started = time.perf_counter()
    install = install_dsh()
    base = tmp_path_factory.mktemp("real-dsh")
    projects = {name: base / folder for name, folder in [("a", "proj-a"), ("b", "proj b (odd) é")]}
    for folder in projects.values():
        folder.mkdir()
    with ModelFixture() as model:
        home = DshHome(install, base / "home", model)
        before: set[str] = set()
        headless = {}
        for name, task, cwd in [
            ("headless-plain", "a plain headless question", projects["a"]),
            ("headless-tool", "headless with a tool #tool:echo from-headless", projects["b"]),
            ("headless-long", "headless long answer #long:90000", projects["a"]),
        ]:
            home.headless(task, cwd)
            made = _sessions_in(home.sessions) - before
            assert len(made) == 1, made
            headless[name] = made.pop()
            before |= {headless[name]}
        with home.web(projects["a"]) as web:
            store = RealStore(home, web, model, projects, dict(headless))
            ids = store.ids
            ids["tool"] = web.create(projects["a"])
            store.turn(ids["tool"], "run something #tool:echo tool-output")
            store.turn(ids["tool"], "and a second question")
            ids["compacted"] = web.create(projects["a"])
            for n in range(3):
                store.turn(ids["compacted"], f"compacted session, turn {n} #long:3000")
            answer = web.command(ids["compacted"], "/compact")
            assert answer["result"]["kind"] == "success", answer
            web.wait_idle(ids["compacted"])
            store.turn(ids["compacted"], "after the manual compaction")
            ids["overflow"] = web.create(projects["b"])
            for n in range(3):
                store.turn(ids["overflow"], f"turn {n} before the overflow #long:4000")
            mark = model.mark()
            store.turn(ids["overflow"], "this one overflows the context #overflow")
            assert [r.kind for r in model.since(mark)][:2] == ["overflow", "compaction"], model.since(mark)
            ids["renamed"] = web.create(projects["b"])
            store.turn(ids["renamed"], "a session to rename")
            assert web.rename(ids["renamed"], ODD_TITLE)["title"] == ODD_TITLE
            ids["long"] = web.create(projects["a"])
            store.turn(ids["long"], "give me a long answer #long:90000")
            ids["odd"] = web.create(projects["b"])
            store.turn(ids["odd"], ODD_TEXT)
            ids["citing"] = web.create(projects["a"])
            store.turn(
                ids["citing"],
                "this session cites "
                + format_session_reference_mention(ids["tool"], "the tool session")
                + " and "
                + format_session_reference_mention(ids["renamed"], ODD_TITLE),
            )
            ids["target"] = web.create(projects["a"])
            store.turn(ids["target"], "the session messages are sent to")
            store.seconds = time.perf_counter() - started
            yield store
