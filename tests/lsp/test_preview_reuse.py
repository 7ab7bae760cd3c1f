"""A preview reuses its document's analysis: no session log is read again for it.

The analysis already holds ``prepare``'s read and retention of every source, and, where the
document has errors, what each read or retention failed with; previewing a document whose
analysis is current must read nothing (a preview of a long prompt re-read every log it mentions,
twice with the model text). Counted on the real catalog over a real store, results untouched.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_support import TARGET_ID
from lsprotocol import types

from dsh_session_reference.lsp.commands import preview_of
from dsh_session_reference.lsp.server import DshLanguageServer
from dsh_session_reference.uri import format_session_reference_mention as mention

UNKNOWN = mention("no-such-session")


@pytest.fixture
async def server(
    store_root: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DshLanguageServer]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ls = DshLanguageServer(sessions=str(store_root))
    params = types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=workspace.as_uri())
    ls.protocol.handle_message(types.InitializeRequest(id=1, params=params))
    ls.apply({"targetSessionId": TARGET_ID})
    yield ls
    ls.engine.store.close()


def counted(reads: Counter[str], name: str, read: Callable[..., Any]) -> Callable[..., Any]:
    def counting(*args: Any, **kwargs: Any) -> Any:
        reads[name] += 1
        return read(*args, **kwargs)

    return counting


def opened(ls: DshLanguageServer, workspace: Path, name: str, text: str) -> str:
    uri = (workspace / name).as_uri()
    ls.documents.open(types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text))
    return uri


async def test_a_preview_reads_no_log_its_current_analysis_read(
    server: DshLanguageServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = server.engine.store
    reads: Counter[str] = Counter()
    for name in ("read_surface", "read_conversation"):
        monkeypatch.setattr(source, name, counted(reads, name, getattr(source, name)))
    alpha = mention("s-alpha", "Refactor the parser")
    clean = opened(server, workspace, "clean.md", f"compare {alpha} and {mention('s-beta', 'notes')}\n")
    broken = opened(server, workspace, "broken.md", f"compare {alpha} and {UNKNOWN}\n")
    for uri in (clean, broken):
        await server.analysis(uri)
    assert reads["read_conversation"] > 0  # the analyses read the logs: what is counted is real
    reads.clear()

    previews = [
        await preview_of(server, uri, model_text=kind) for uri in (clean, broken) for kind in (False, True)
    ]

    assert sum(reads.values()) == 0
    ok, model, failed, failed_model = previews
    assert ok is not None and ok.ok and ok.summary.startswith("2 sessions referenced;")
    assert model is not None and model.ok and "<referenced-sessions>" in model.text
    error = 'SESSION_REFERENCE_READ_FAILED: failed to read referenced session: session "no-such-session" not found'
    assert failed is not None and not failed.ok and failed.summary == f"prepare failed: {error}"
    assert failed_model is not None and failed_model.text == f"error: {error}\n"

    # A file that is not open has no analysis: its preview reads what it mentions.
    on_disk = tmp_path / "closed.md"
    on_disk.write_text(f"compare {alpha}\n")
    closed = await preview_of(server, on_disk.as_uri())
    assert closed is not None and closed.ok and reads["read_conversation"] == 1


async def test_an_analysis_kept_for_a_document_does_not_keep_an_old_roots_catalog(
    server: DshLanguageServer, workspace: Path, tmp_path: Path
) -> None:
    """A catalog dropped for another root stops its watcher, thread and worker when collected; an
    open document's analysis (a background tab no one asks about again) must not hold it."""
    uri = opened(server, workspace, "kept.md", f"compare {mention('s-alpha', 'Refactor the parser')}\n")
    await server.analysis(uri)
    old = weakref.ref(server.engine.store)
    server.apply({"sessionsRoot": str(tmp_path / "another-root")})
    assert server.engine.store is not old()
    # Work begun for the old root (its first listing, in a thread) may still be ending: it lets
    # go then. What must not hold it is the analysis, which stays as long as the document.
    deadline = time.monotonic() + 20
    while True:
        gc.collect()
        if (store := old()) is None:
            break
        held_by = sorted({type(referrer).__name__ for referrer in gc.get_referrers(store)})
        del store
        assert time.monotonic() < deadline, f"the old root's catalog is still held, by: {held_by}"
        await asyncio.sleep(0.05)
