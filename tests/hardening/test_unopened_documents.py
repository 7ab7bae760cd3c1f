"""A command on a document that is not open reads it from disk, and a client may name any path.

``dshSessionReference.preview`` (and the preview's virtual document) accept a
``file:`` URI that is not open. Any client can send one, naming a FIFO (whose
open or read would block a thread for good), ``/dev/zero`` (endless), or a huge
file. Each must get a clear ``InvalidParams`` at once, memory must stay small,
completion must keep answering, and the server must still exit cleanly.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from lsp_harness import lsp_session, server_pid
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from dsh_session_reference.jsjson import UNTRUSTED_DOCUMENT_BYTES
from dsh_session_reference.sample import write_sample_store
from dsh_session_reference.uri import format_session_reference_mention

from .audit import audited_env, audited_server_command, vm_kb

PREVIEW = "dshSessionReference.preview"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unopened") / "sessions"
    write_sample_store(root, compression="none")
    return root


async def test_a_fifo_dev_zero_and_a_huge_file_are_refused_at_once(
    root: Path, tmp_path: Path, workspace: Path
) -> None:
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.md"
    huge.touch()
    os.truncate(huge, UNTRUSTED_DOCUMENT_BYTES + 1)  # sparse: 64 MiB and one byte, no disk used
    good = tmp_path / "good.md"
    good.write_text("see " + format_session_reference_mention("no-such-session"))
    refused = {
        fifo.as_uri(): "not a regular file",
        "file:///dev/zero": "not a regular file",
        huge.as_uri(): "larger than 64 MiB",
        (tmp_path / "missing.md").as_uri(): "No such file",
    }
    log = tmp_path / "server.log"
    async with lsp_session(audited_server_command(), audited_env(log), workspace, root) as s:
        for _ in range(8):  # more than the default thread pool could lose to blocked reads
            for uri, reason in refused.items():
                with pytest.raises(JsonRpcException, match=reason):
                    await asyncio.wait_for(s.command(PREVIEW, uri), 15)
        content = types.TextDocumentContentParams(uri=f"dsh-preview:/x (context).txt?{fifo.as_uri()}")
        with pytest.raises(JsonRpcException, match="not a regular file"):
            await asyncio.wait_for(s.client.workspace_text_document_content_async(content), 15)
        preview = await asyncio.wait_for(s.command(PREVIEW, good.as_uri()), 15)
        assert preview["ok"] is False and "no-such-session" in preview["text"]
        completion = await asyncio.wait_for(s.complete(s.open(workspace, "@")), 15)
        assert completion.items
        assert vm_kb(server_pid(s), "VmHWM") < 200 * 1024
