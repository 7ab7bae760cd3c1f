"""What the server imports to answer ``initialize`` and the first ``@``: nothing only a command or a
later request uses.

Its start is mostly Python importing modules, and an editor's reload waits for it on cores the
editor is using too (issue 36: 2 s to ``initialize`` in VS Code on two cores, 0.55 s alone). The
modules below are each imported at their point of use (a send, a preview, a transcript, a patch
file in dsh's profile, a ``createdAt`` tie): a module-level import of any of them brings it back
into every start, which this test names. Structural, not timed: ``bench/startup.py`` times it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from lsp_harness import lsp_session
from lsp_support import NO_DSH_HOME, TARGET_ID, default_specs, write_store
from lsprotocol import types

NOT_AT_START = (
    "http.client",  # the HTTP client: a send to dsh web only
    "email.parser",
    "dsh_session_reference.lsp.dsh_web_client",
    "dsh_session_reference.dsh_web",
    "dsh_session_reference.yaml_subset",  # a patch file in dsh's profile only
    "icu",  # sessions created in the same millisecond only
    "dsh_session_reference.report",  # a preview or the model text only
    "dsh_session_reference.transcript",  # a transcript, or a mention's inlay hint
    "dsh_session_reference.sample",  # other CLI commands
    "dsh_session_reference.check",
    "dsh_session_reference.lsp.demo",
)

SERVED = ("lsprotocol.types", "dsh_session_reference.lsp.server", "dsh_session_reference.store.catalog")
"""Imported by any server that listed its root: the record below is the server's."""


def _server_command(record: Path) -> list[str]:
    """The program's ``lsp`` entry, as ``python -m dsh_session_reference lsp --stdio`` runs it,
    writing the modules it imported to ``record`` when it exits."""
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(record)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        "from dsh_session_reference.main import main\n"
        "sys.exit(main(['lsp', '--stdio']))\n"
    )
    return [sys.executable, "-P", "-c", code]


async def test_initialize_and_the_first_completion_import_no_command_only_module(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    root = write_store(tmp_path / "sessions", default_specs(str(workspace)))
    record = tmp_path / "modules.json"
    env = {
        **os.environ,
        "DSH_SESSION_ID": TARGET_ID,
        "DSH_HOME": str(NO_DSH_HOME),  # no profile: a patch file would rightly need the YAML reader
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    async with lsp_session(_server_command(record), env, workspace, root, cwd=tmp_path) as session:
        uri = session.open(workspace, "see @")
        # What VS Code asks of a prompt it opens, then the first ``@`` (asked until it lists sessions).
        assert await session.diagnostics(uri) == []
        assert await session.inlay_hints(uri) == []
        document = types.TextDocumentIdentifier(uri=uri)
        await session.client.text_document_code_lens_async(types.CodeLensParams(text_document=document))
        completion = await session.complete(uri)
        assert "Refactor the parser" in [item.label for item in completion.items]
    imported = set(json.loads(record.read_text()))
    assert set(SERVED) <= imported
    assert sorted(imported.intersection(NOT_AT_START)) == []
