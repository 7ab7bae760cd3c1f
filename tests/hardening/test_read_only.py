"""The read-only guarantee: nothing that touches a sessions root changes a byte, a time or a name in it.

One root (the realistic sample store plus the light corrupt-corpus cases and
symlinks) is put through everything that reads a store: the store and the
resolver, every CLI command, and a language-server session with completion,
resolve, diagnostics, hover, code actions, the preview (command and virtual
document), candidates, the summary, inlay hints, code lenses, document links, a transcript,
workspace symbols and edits, with the root watched all along. Afterwards:

* the tree is identical: same entries, and for each its content digest (or
  link target), mode, size, inode, mtime *and ctime* (which no process can set
  back, so even a change that restored the mtime would show);
* no audited process (the CLI, the server and any worker it spawned) opened a
  path under the root for writing, or renamed, removed, created, chmod-ed,
  utime-d, truncated, linked or locked anything there, or opened a database there.

Every CLI command and the server run as an editor runs them in an untrusted
folder: inside a workspace that plants ``pickle.py``, ``sqlite3.py``, a fake
``dsh_session_reference`` package and the like (none may run), with a cache
folder whose every index name is a symlink into the root (none may be followed).

The audit machinery is itself tested first, so a silent hook cannot pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsprotocol import types

from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.sample import SAMPLE_SESSION_IDS, write_sample_store
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.uri import encode_session_reference_uri, format_session_reference_mention

from .audit import (
    STDLIB_PLANTS,
    Audit,
    audited_env,
    console_script,
    plant,
    plant_cache,
    run_audited,
)
from .corpus import CASES, outside_dir

Snapshot = dict[str, tuple[object, ...]]
OLD = 1_000_000_000_000_000_000  # 2001-09-09, in ns: any write would move an mtime off it


def tree_state(root: Path) -> Snapshot:
    """Every entry under ``root`` with its digest or link target, mode, size, inode, mtime and ctime."""
    state: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if os.path.islink(path):
                content: object = os.readlink(path)
            elif os.path.isfile(path):
                digest = hashlib.sha256()
                with open(path, "rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
                content = digest.hexdigest()
            else:
                content = "<dir>"
            key = os.path.relpath(path, root)
            state[key] = (
                content,
                info.st_mode,
                info.st_size,
                info.st_ino,
                info.st_mtime_ns,
                info.st_ctime_ns,
            )
    return state


@pytest.fixture(scope="module")
def frozen_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample store and the light corpus cases, every mtime set far in the past."""
    root = tmp_path_factory.mktemp("readonly") / "sessions"
    write_sample_store(root)
    for case in CASES:
        if not case.heavy:
            case.build(root, case.name)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.utime(os.path.join(directory, name), ns=(OLD, OLD), follow_symlinks=False)
    os.utime(root, ns=(OLD, OLD))
    return root


def test_the_audit_hook_sees_writes_in_every_process(tmp_path: Path) -> None:
    """A hook that saw nothing would make every test below pass; it must see a write, a rename,
    a database and a lock taken through a descriptor (by the file it locks), in a worker process
    as much as in the main one, and a write, a database and a lock made through a symlink or a
    hard link in another folder (the cache folder's names could be such links)."""
    root = tmp_path / "sessions"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    code = (
        "import fcntl, multiprocessing, os, sqlite3, sys\n"
        "def child(root):\n"
        "    open(os.path.join(root, 'child.txt'), 'w').close()\n"
        "if __name__ == '__main__':\n"
        "    root = sys.argv[1]\n"
        "    open(os.path.join(root, 'a.txt'), 'w').close()\n"
        "    os.rename(os.path.join(root, 'a.txt'), os.path.join(root, 'b.txt'))\n"
        "    sqlite3.connect(os.path.join(root, 'db.sqlite')).close()\n"
        "    fd = os.open(os.path.join(root, 'b.txt'), os.O_RDONLY)\n"
        "    fcntl.flock(fd, fcntl.LOCK_SH)\n"
        "    os.close(fd)\n"
        "    other = os.path.join(os.path.dirname(root), 'elsewhere')\n"
        "    os.symlink(os.path.join(root, 'b.txt'), os.path.join(other, 'soft'))\n"
        "    os.link(os.path.join(root, 'b.txt'), os.path.join(other, 'hard'))\n"
        "    open(os.path.join(other, 'soft'), 'a').close()\n"
        "    sqlite3.connect(os.path.join(other, 'soft')).close()\n"
        "    fd = os.open(os.path.join(other, 'hard'), os.O_RDONLY)\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "    os.close(fd)\n"
        "    process = multiprocessing.get_context('spawn').Process(target=child, args=(root,))\n"
        "    process.start(); process.join()\n"
    )
    script = tmp_path / "writer.py"
    script.write_text(code)
    log = tmp_path / "audit.log"
    subprocess.run([sys.executable, str(script), str(root)], env=audited_env(log), check=True, timeout=60)
    audit = Audit.read(log)
    written = audit.writes_under(root)
    kinds = {event["event"] for event in written}
    assert {"open", "os.rename", "sqlite3.connect", "fcntl.flock"} <= kinds
    assert len({event["pid"] for event in written}) == 2, "the spawned worker was not audited"
    through_links = {
        (event["event"], os.path.basename(str(event.get("path") or event["paths"][0])))
        for event in written
        if "elsewhere" in str(event.get("path") or event.get("paths"))
    }
    assert {("open", "soft"), ("sqlite3.connect", "soft"), ("fcntl.flock", "hard")} <= through_links
    (tmp_path / "nowhere").mkdir()
    assert audit.writes_under(tmp_path / "nowhere") == []


def assert_untouched(audit: Audit, root: Path) -> None:
    writes = audit.writes_under(root)
    assert writes == [], writes
    assert any(event["event"] == "open" for event in audit.events), "nothing was recorded at all"


async def test_nothing_changes_under_a_root_that_everything_reads(
    frozen_root: Path, tmp_path: Path, workspace: Path
) -> None:
    root = frozen_root
    before = tree_state(root)
    mentions = " and ".join(format_session_reference_mention(sid) for sid in SAMPLE_SESSION_IDS[:2])
    broken = " ".join(format_session_reference_mention(case.name) for case in CASES if not case.heavy)
    good = tmp_path / "good.md"
    good.write_text(f"compare {mentions}\n")
    bad = tmp_path / "bad.md"
    bad.write_text(f"{broken} dsh-session:MTIz {encode_session_reference_uri(SAMPLE_SESSION_IDS[0])}x\n")

    # The library (store + resolver), in this process and audited in a subprocess.
    store = JsonlSessionStore(root)
    records = store.list_sessions()
    store.read_titles(records)
    resolver = SessionReferenceResolver(store)
    await resolver.list_candidates(AgentRef(None, "/w"), "e")
    for case in CASES:
        try:
            store.read_surface(case.name)
        except Exception as error:  # every outcome is fine here; only the tree matters
            assert type(error).__name__ == "StoreError"
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps([*SAMPLE_SESSION_IDS, *(case.name for case in CASES)]))
    probe = run_audited(
        [str(root), "--query", "e", "@" + str(ids)], tmp_path / "probe.log", module="hardening.probe_store"
    )
    assert probe.returncode == 0, probe.stderr
    audits = [probe.audit]

    # Every CLI command that reads a root, run inside a workspace that plants modules, with a
    # cache folder whose every index name is a symlink into the root.
    marker = tmp_path / "planted-code-ran.txt"
    repo = plant(tmp_path / "repo", STDLIB_PLANTS, marker, package=True)
    common = ["--sessions", str(root)]
    for number, args in enumerate(
        [
            ["candidates", *common],
            ["candidates", "--json", "review", *common],
            ["prepare", *common, str(good)],
            ["prepare", "--json", *common, str(good)],
            ["prepare", *common, str(bad)],
            ["check", *common, str(good), str(bad)],
            ["check", "--json", *common, str(bad)],
            ["parse", str(good)],
        ]
    ):
        log = tmp_path / f"cli-{number}.log"
        plant_cache(log, root)
        run = run_audited(args, log, program=console_script(), cwd=repo)
        assert run.returncode in (0, 1), (args, run.stderr)
        audits.append(run.audit)

    # A language-server session using every feature that reads the store.
    log = tmp_path / "server.log"
    plant_cache(log, root)
    command = [*console_script(), "lsp", "--stdio"]
    async with lsp_session(command, audited_env(log), workspace, root, cwd=repo) as s:
        uri = s.open(workspace, f"{mentions}\n{broken}\n@")
        completion = await s.complete(uri)
        assert completion.items
        await s.client.completion_item_resolve_async(completion.items[0])
        s.type_text(uri, "rev")
        await s.complete(uri)
        found = await s.diagnostics(uri, lambda d: len(d) > 0)
        await s.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 3)
            )
        )
        for diagnostic in found[:5]:
            await s.actions(uri, s.texts[uri].find("@"), [diagnostic])
        good_uri = s.open(workspace, good.read_text())
        preview = await s.command("dshSessionReference.preview", good_uri)
        assert preview["ok"] is True
        content = await s.client.workspace_text_document_content_async(
            types.TextDocumentContentParams(uri=preview["uri"])
        )
        assert content.text == preview["text"]
        assert await s.command("dshSessionReference.preview", good.as_uri())  # a file that is not open
        assert await s.command("dshSessionReference.candidates", {"query": "e", "documentUri": uri})
        assert (await s.command("dshSessionReference.documentSummary", good_uri))["errors"] == 0
        # Issue 19: transcripts, symbols, hints and lenses read the store too (and the root is watched).
        whole = types.Range(start=types.Position(0, 0), end=s.end(good_uri))
        document = types.TextDocumentIdentifier(uri=good_uri)
        await s.client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=document, range=whole)
        )
        await s.client.text_document_code_lens_async(types.CodeLensParams(text_document=document))
        links = await s.client.text_document_document_link_async(
            types.DocumentLinkParams(text_document=document)
        )
        assert links
        # A link whose label misleads gets its target only when followed (resolved): resolving reads too.
        link = links[0] if links[0].target else await s.client.document_link_resolve_async(links[0])
        assert link.target
        transcript = await s.client.workspace_text_document_content_async(
            types.TextDocumentContentParams(uri=link.target)
        )
        assert transcript.text.startswith("dsh session transcript")
        assert await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query="e"))
        s.replace(uri, 0, 0, "edited ")
        await s.diagnostics(uri)
        s.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    audits.append(Audit.read(log))

    for audit in audits:
        assert_untouched(audit, root)
        assert audit.writes_under(outside_dir(root)) == []
    assert not marker.exists(), marker.read_text()
    after = tree_state(root)
    assert sorted(after) == sorted(before), "entries appeared or vanished under the root"
    changed = {path: (before[path], after[path]) for path in before if before[path] != after[path]}
    assert changed == {}
