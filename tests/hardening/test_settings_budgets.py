"""Budgets no setting can turn into an attack, and dsh's own budgets read without running anything.

A repository's settings reach the server through every editor (VS Code's workspace settings
before the budgets became machine settings, Neovim's exrc, Zed's and Helix's project files), so
the server clamps each budget itself: ``maxReferenceBytes`` 2^53-1 and one mention of a big
session made a 63 MB preview, ``candidateLimit`` 2^53-1 a completion reply of every session.
dsh's profile (``$DSH_HOME/profiles/web/cordis.patch.yml``) is read as data: a ``!!js`` value is
never evaluated, and a FIFO, a symlink to ``/dev/zero``, a huge or non-UTF-8 file cost nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsp_support import Spec, wait_until, write_store
from lsprotocol import types

from dsh_session_reference import assembly
from dsh_session_reference.config import BUDGET_BOUNDS
from dsh_session_reference.uri import format_session_reference_mention

from .audit import audited_env, audited_server_command

HUGE = 2**53 - 1
MANIFEST = Path(__file__).parents[2] / "vscode-client" / "package.json"
WHAT_IS_READ_OR_SENT = {
    "maxReferences",
    "candidateLimit",
    "maxReferenceBytes",
    "profile",
    "bodySearch",
    "documentSelector",
    "sessionsRoot",
    "interpreter",
    "dshWebUrl",
}
"""Every VS Code setting that changes what is read, how much, or what is sent (or what runs, or where a
prompt goes)."""
WORKSPACE_MAY_SET = {
    "targetSessionId",
    "inlayHints",
    "codeLens",
    "collapseMentions",
    "trace.server",
    "server.logLevel",
}
"""The rest, each harmless at its worst: which session is the prompt's own, and how things show."""
SESSIONS = 1_100
BIG_MESSAGE = 3 << 20


@pytest.fixture(scope="module")
def big_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More sessions than the candidate bound, and one whose text is three times the byte bound."""
    specs = [Spec(f"s-{n:05}", "/work/p", f"session {n}", [("user", "hi")]) for n in range(SESSIONS)]
    specs.append(Spec("s-big", "/work/p", "big", [("user", "x" * BIG_MESSAGE), ("assistant", "ok")]))
    return write_store(tmp_path_factory.mktemp("big-root"), specs, "none")


def dsh_home(tmp_path: Path, patch: str | None = None) -> Path:
    home = tmp_path / "dsh-home"
    (home / "profiles" / "web").mkdir(parents=True)
    if patch is not None:
        (home / "profiles" / "web" / "cordis.patch.yml").write_text(patch, encoding="utf-8")
    return home


def budgets(preview: str) -> dict[str, str]:
    """The preview's ``Budgets`` block: name -> "value from origin"."""
    lines = preview.split("\n")
    start = lines.index("Budgets")
    found = {}
    for line in lines[start + 1 : start + 4]:
        name, _, rest = line.strip().partition(" ")
        found[name] = rest.strip()
    return found


async def test_a_huge_budget_from_a_clients_settings_is_clamped_and_said_once(
    tmp_path: Path, workspace: Path, big_root: Path
) -> None:
    env = audited_env(tmp_path / "server.log") | {"DSH_HOME": str(dsh_home(tmp_path))}
    async with lsp_session(
        audited_server_command(), env, workspace, big_root, maxReferenceBytes=HUGE, candidateLimit=HUGE
    ) as s:
        rows = await s.command("dshSessionReference.candidates", {"query": ""})
        assert len(rows) == BUDGET_BOUNDS["candidateLimit"]  # was every one of the 1,101 sessions
        uri = s.open(workspace, f"see {format_session_reference_mention('s-big', 'big')}")
        model = await s.command("dshSessionReference.modelText", uri)
        assert len(model["text"].encode()) < 2 * BUDGET_BOUNDS["maxReferenceBytes"]  # was over 3 MB
        preview = await s.command("dshSessionReference.preview", uri)
        assert budgets(preview["text"]) == {
            "maxReferences": "3 from dsh's default",
            "candidateLimit": "1,000 from the editor's setting dshSessionReference.candidateLimit",
            "maxReferenceBytes": "1,048,576 from the editor's setting dshSessionReference.maxReferenceBytes",
        }
        said = "is above this server's bound of 1,048,576; using 1,048,576"
        await wait_until(lambda: any(said in m.message for m in s.client.messages))
        # Pushed again (as every settings change does): clamped again, not said again.
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"dshSessionReference": {"maxReferenceBytes": HUGE, "codeLens": False}}
            )
        )
        await s.command("dshSessionReference.candidates", {"query": "session 1"})
        await asyncio.sleep(0.5)
        assert sum(said in m.message for m in s.client.messages) == 1


JS_PROFILE = """\
# Your patch layer for this dsh profile, applied after every bundle layer:
# a top-level YAML array of loader patch entries (id-targeted config
# overrides, disables, and insert lists; `!!js` expressions allowed).
- id: session-reference
  config:
    maxReferences: 2
    maxReferenceBytes: !!js "require('fs').writeFileSync({marker!r}, 'ran') || 300"
"""


async def test_dshs_profile_sets_the_budgets_and_a_js_value_is_never_run(
    tmp_path: Path, workspace: Path, big_root: Path
) -> None:
    marker = tmp_path / "ran"
    home = dsh_home(tmp_path, JS_PROFILE.format(marker=str(marker)))
    env = audited_env(tmp_path / "server.log") | {"DSH_HOME": str(home)}
    profile = home / "profiles" / "web" / "cordis.patch.yml"
    async with lsp_session(audited_server_command(), env, workspace, big_root) as s:
        uri = s.open(workspace, f"see {format_session_reference_mention('s-00001', 'one')}")
        preview = await s.command("dshSessionReference.preview", uri)
        shown = budgets(preview["text"])
        assert shown.pop("maxReferenceBytes").startswith(
            "65,536 from dsh's default, but dsh's may differ: it is \"!!js require('fs')"
        )  # dsh evaluates the !!js: its number is not known here, and the block says so
        assert shown == {
            "maxReferences": f"2 from dsh profile 'web' ({profile})",
            "candidateLimit": "50 from dsh's default",
        }
        said = "maxReferenceBytes is a !!js expression, which is never evaluated here; ignored"
        await wait_until(lambda: any(said in m.message for m in s.client.messages))
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge", "not-utf8", "loop"])
def test_a_hostile_profile_file_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    home = dsh_home(tmp_path)
    path = home / "profiles" / "web" / "cordis.patch.yml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        path.write_text("- id: session-reference\n  config: {maxReferenceBytes: 300}\n" + "#" * (8 << 20))
    elif kind == "not-utf8":
        path.write_bytes(b"- id: session-reference\n  config: {maxReferenceBytes: 300}\n# \xff\n")
    else:
        path.symlink_to(path)
    monkeypatch.setenv("DSH_HOME", str(home))
    started = time.monotonic()
    read = assembly.dsh_profile_budgets()
    assert time.monotonic() - started < 5
    assert read.values == {}
    expected = {
        "fifo": "is not a regular file",
        "dev-zero": "is not a regular file",
        "huge": "is larger than 64 KiB",
        "not-utf8": "is not UTF-8",
        "loop": "cannot be read (Too many levels of symbolic links)",
    }[kind]
    assert len(read.warnings) == 1 and expected in read.warnings[0], read.warnings


def test_a_symlinked_profile_file_is_read_as_dsh_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dotfile managers link ``cordis.patch.yml`` from elsewhere; dsh reads through the link."""
    home = dsh_home(tmp_path)
    real = tmp_path / "dotfiles" / "cordis.patch.yml"
    real.parent.mkdir()
    real.write_text("- id: session-reference\n  config:\n    maxReferenceBytes: 300\n")
    (home / "profiles" / "web" / "cordis.patch.yml").symlink_to(real)
    monkeypatch.setenv("DSH_HOME", str(home))
    assert assembly.dsh_profile_budgets().values == {"maxReferenceBytes": 300}


def test_no_workspace_can_set_what_is_read_or_sent_in_vs_code() -> None:
    """Before: the budgets, bodySearch and documentSelector had no scope (a repository's
    ``.vscode/settings.json`` set them) and were not restricted in untrusted workspaces."""
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    properties = manifest["contributes"]["configuration"]["properties"]
    restricted = set(manifest["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"])
    section = "dshSessionReference."
    named = {key.removeprefix(section) for key in properties}
    assert named - WHAT_IS_READ_OR_SENT <= WORKSPACE_MAY_SET, "a new setting must be judged here"
    for key in WHAT_IS_READ_OR_SENT:
        assert properties[section + key]["scope"] in ("machine", "application"), key
        assert section + key in restricted, key
    for key, bound in (("candidateLimit", "candidateLimit"), ("maxReferenceBytes", "maxReferenceBytes")):
        assert properties[section + key]["maximum"] == BUDGET_BOUNDS[bound], key


def test_zed_runs_no_command_env_or_root_a_projects_settings_name() -> None:
    """Before: the extension ran ``binary.arguments`` with ``binary.env`` (``PYTHONPATH=.`` runs the
    project's code in the server) and passed ``sessionsRoot`` on, all from settings Zed merges with
    the project's own ``.zed/settings.json``. Zed's API cannot run here (docs/editors.md says why),
    so this reads the glue: no use of the binary settings, and both settings objects filtered."""
    source = (Path(__file__).parents[2] / "editors" / "zed" / "src" / "lib.rs").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in source.splitlines())
    unquoted = re.sub(r'"(?:[^"\\]|\\[\s\S])*"', '""', code)
    assert not re.search(r"\.(binary|arguments|env)\b", unquoted), (
        "the command must take nothing from settings"
    )
    assert 'const USER_ONLY: [&str; 2] = ["sessionsRoot", "profile"];' in code
    for field in ("initialization_options", "settings"):
        assert f"without_user_only(lsp_settings(language_server_id, worktree).{field})" in code, field
    assert 'args: vec!["lsp".to_string()],' in code and "env: worktree.shell_env()," in code


def test_the_jetbrains_template_and_the_documented_settings_leave_the_budgets_to_dsh() -> None:
    """A budget written into a template or a documented config overrides dsh's profile for everyone
    who copies it (the preview would then not be dsh's accounting)."""
    repo = Path(__file__).parents[2]
    template = repo / "editors" / "jetbrains" / "dsh-session-reference"
    for name in ("settings.json", "initializationOptions.json"):
        section = json.loads((template / name).read_text(encoding="utf-8"))["dshSessionReference"]
        assert not set(section) & {"maxReferences", "candidateLimit", "maxReferenceBytes", "sessionsRoot"} - {
            "sessionsRoot" if name == "initializationOptions.json" else ""
        }, (name, section)
    editors = (repo / "docs" / "editors.md").read_text(encoding="utf-8")
    assert not re.search(r"maxReferenceBytes[\"']?\s*[:=]|:maxReferenceBytes \d", editors)
