"""The Helix setup in docs/editors.md: a ``languages.toml`` Helix accepts, and the server answering
the command, ``config`` and ``workspace/configuration`` it makes of it.

No Helix binary installs from the registries here (not in Debian 12, not on PyPI or npm), so the
block is checked against what Helix documents and parses: ``book/src/languages.md`` and the serde
types of ``helix-core/src/syntax/config.rs`` (helix-editor/helix at 079a789e, 2026-07-23), where a
``[[language]]`` table refuses unknown keys and a ``[language-server.*]`` table takes ``command``,
``args``, ``environment``, ``config``, ``timeout`` and ``required-root-patterns``. Helix sends
``config`` as ``initializationOptions`` and answers ``workspace/configuration`` by looking each
item's dotted section up in it (``helix-term/src/application.rs``).
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_session_reference.lsp.settings import section_of
from editors.environment import isolated_env
from editors.lsp_stdio import mention_completion

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import Scenario

LANGUAGE_SERVER_KEYS = {"command", "args", "environment", "config", "timeout", "required-root-patterns"}
LANGUAGE_KEYS = {
    "name", "language-id", "scope", "injection-regex", "file-types", "shebangs", "roots", "auto-format",
    "diagnostic-severity", "comment-tokens", "comment-token", "block-comment-tokens", "indent",
    "language-servers", "grammar", "formatter", "soft-wrap", "text-width", "rulers", "path-completion",
    "word-completion", "workspace-lsp-roots", "persistent-diagnostic-sources", "rainbow-brackets",
    "code-actions-on-save", "auto-pairs", "debugger",
}  # fmt: skip
FEATURES = {
    "format", "goto-declaration", "goto-definition", "goto-type-definition", "goto-reference",
    "goto-implementation", "signature-help", "hover", "document-highlight", "completion", "code-action",
    "document-links", "workspace-command", "document-symbols", "workspace-symbols", "diagnostics",
    "rename-symbol", "inlay-hints", "document-colors", "call-hierarchy",
}  # fmt: skip
HELIX_MARKDOWN_SERVERS = {"marksman", "markdown-oxide", "rumdl"}
"""Helix's own languages.toml defines these for Markdown; a user file may name them undefined."""


def _block(documented_config: Callable[[str, dict[str, str]], str], root: str = "", target: str = "") -> str:
    return documented_config(
        "helix",
        {
            'sessionsRoot = ""': f"sessionsRoot = {json.dumps(root)}",
            'targetSessionId = ""': f"targetSessionId = {json.dumps(target)}",
        },
    )


def _server_names(entries: list[Any]) -> list[str]:
    """``language-servers`` entries: a name, or ``{name, only-features | except-features}``."""
    names = []
    for entry in entries:
        if isinstance(entry, str):
            names.append(entry)
            continue
        assert isinstance(entry, dict) and set(entry) <= {"name", "only-features", "except-features"}, entry
        assert set(entry.get("only-features", [])) | set(entry.get("except-features", [])) <= FEATURES, entry
        names.append(entry["name"])
    return names


def test_the_languages_toml_is_one_helix_accepts(
    documented_config: Callable[[str, dict[str, str]], str],
) -> None:
    config = tomllib.loads(_block(documented_config))
    assert set(config) <= {"language", "language-server", "grammar"}, set(config)

    servers = config["language-server"]
    server = servers["dsh-session-reference"]
    assert set(server) <= LANGUAGE_SERVER_KEYS, set(server) - LANGUAGE_SERVER_KEYS
    assert isinstance(server["command"], str)
    assert isinstance(server.get("args", []), list) and all(
        isinstance(a, str) for a in server.get("args", [])
    )
    assert isinstance(server.get("environment", {}), dict)
    assert isinstance(server.get("timeout", 20), int)
    # The command is the console script pyproject installs; the config is the server's own section.
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert server["command"] in pyproject["project"]["scripts"]
    assert server["args"] == ["lsp"]
    assert section_of(server["config"]) is server["config"]["dshSessionReference"]

    (markdown,) = config["language"]
    assert set(markdown) <= LANGUAGE_KEYS, set(markdown) - LANGUAGE_KEYS
    assert markdown["name"] == "markdown", "Helix's Markdown language is named 'markdown'"
    names = _server_names(markdown["language-servers"])
    assert "dsh-session-reference" in names
    assert set(names) <= set(servers) | HELIX_MARKDOWN_SERVERS, names


def test_helix_config_reaches_the_server(
    scenario: Scenario,
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    """What Helix does with the block: ``command`` + ``args`` with ``environment`` on top of its own,
    ``config`` at initialize and for ``workspace/configuration``. ``@`` lists the store's sessions
    in dsh's order."""
    config = tomllib.loads(_block(documented_config, str(scenario.sessions_root), scenario.target_id))
    server = config["language-server"]["dsh-session-reference"]
    path = f"{scenario.server_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    command = shutil.which(server["command"], path=path)
    assert command == str(scenario.server_bin / server["command"])
    env = isolated_env(tmp_path / "home", path, **server.get("environment", {}))
    ids = mention_completion(
        [command, *server["args"]],
        env,
        scenario.workspace,
        scenario.prompt,
        server["config"],
        server["config"],
        tmp_path / "server.log",
    )
    assert ids == [candidate.session_id for candidate in scenario.candidates]
