"""The JetBrains setup: the LSP4IJ template in ``editors/jetbrains/dsh-session-reference`` and the
configuration docs/editors.md shows, read as LSP4IJ reads them and run against the server.

No JetBrains IDE installs from the registries here. The template's fields are those LSP4IJ's
readers take (redhat-developer/lsp4ij ``templates/ServerTemplate.java``,
``ServerTemplateJsonDeserializer.java`` and ``launching/templates/LanguageServerTemplateDeserializer.java``):
``programArgs`` by OS key, ``fileTypeMappings`` of ``{fileType: {name, patterns}, languageId}``,
``languageMappings`` of ``{language, languageId}``; ``initializationOptions.json`` and
``settings.json`` beside it fill the Configuration tab. LSP4IJ sends the first as
``initializationOptions`` and answers ``workspace/configuration`` from the second.
"""

from __future__ import annotations

import json
import os
import shlex
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

REPO = Path(__file__).resolve().parents[3]
TEMPLATE = REPO / "editors" / "jetbrains" / "dsh-session-reference"
TEMPLATE_KEYS = {
    "id", "name", "dev", "url", "programArgs", "env", "workingDir", "fileTypeMappings", "languageMappings",
    "expandConfiguration", "description", "disablePromotionFor", "promotable",
}  # fmt: skip
OS_KEYS = {"default", "windows", "mac", "unix"}
TEMPLATE_FILES = {"template.json", "initializationOptions.json", "settings.json", "README.md"}
"""Files LSP4IJ imports from a template folder (LanguageServerTemplate's file names)."""


def _json(name: str) -> Any:
    return json.loads((TEMPLATE / name).read_text(encoding="utf-8"))


def test_the_template_is_one_lsp4ij_imports() -> None:
    assert {path.name for path in TEMPLATE.iterdir()} == TEMPLATE_FILES
    template = _json("template.json")
    assert set(template) <= TEMPLATE_KEYS, set(template) - TEMPLATE_KEYS
    assert template["id"] == "dsh-session-reference" and template["name"]
    assert set(template["programArgs"]) <= OS_KEYS and "default" in template["programArgs"]
    argv = shlex.split(template["programArgs"]["default"])
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert argv[0] in pyproject["project"]["scripts"] and argv[1:] == ["lsp"]
    mappings = template["fileTypeMappings"]
    for mapping in mappings:
        assert set(mapping) == {"fileType", "languageId"}, mapping
        assert set(mapping["fileType"]) <= {"name", "patterns"}, mapping
        assert all(isinstance(pattern, str) for pattern in mapping["fileType"].get("patterns", []))
    markdown = [m for m in mappings if m["fileType"].get("name") == "Markdown"]
    assert markdown and markdown[0]["languageId"] == "markdown", "the IDE's Markdown file type is 'Markdown'"
    assert "*.dshprompt" in markdown[0]["fileType"]["patterns"]
    for name in ("initializationOptions.json", "settings.json"):
        options = _json(name)
        assert section_of(options) is options["dshSessionReference"], name


def test_the_documented_blocks_are_the_template_files(
    documented_config: Callable[[str, dict[str, str]], str],
) -> None:
    """What a user types by hand is what the template imports."""
    assert json.loads(documented_config("lsp4ij-initialization-options", {})) == _json(
        "initializationOptions.json"
    )
    assert json.loads(documented_config("lsp4ij-configuration", {})) == _json("settings.json")
    docs = (REPO / "docs" / "editors.md").read_text(encoding="utf-8")
    assert f"**Command** `{_json('template.json')['programArgs']['default']}`" in docs


def test_lsp4ij_configuration_reaches_the_server(scenario: Scenario, tmp_path: Path) -> None:
    """The template's command, its initialization options (the sessions root and target filled in,
    as a user would) and its settings for ``workspace/configuration``: ``@`` lists the store's
    sessions in dsh's order."""
    options = _json("initializationOptions.json")
    options["dshSessionReference"].update(
        sessionsRoot=str(scenario.sessions_root), targetSessionId=scenario.target_id
    )
    argv = shlex.split(_json("template.json")["programArgs"]["default"])
    path = f"{scenario.server_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    command = shutil.which(argv[0], path=path)
    assert command == str(scenario.server_bin / argv[0])
    ids = mention_completion(
        [command, *argv[1:]],
        isolated_env(tmp_path / "home", path),
        scenario.workspace,
        scenario.prompt,
        options,
        _json("settings.json"),
        tmp_path / "server.log",
    )
    assert ids == [candidate.session_id for candidate in scenario.candidates]
