"""The Zed extension (``editors/zed``): a manifest Zed loads and its registry accepts, Rust that
type-checks against the extension API it names, and a command and settings the server answers.

No Zed binary, no ``zed_extension_api`` crate and no wasm standard library can be installed from
the registries here (docs/editors.md says which and why), so the WebAssembly build is the one step
not run. The manifest rules are Zed's own: the fields of ``ExtensionManifest``
(``crates/extension/src/extension_manifest.rs``) and the checks of zed-industries/extensions
(``src/lib/validation.js``, ``src/lib/license.js``) that a published extension must pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import dsh_session_reference
from editors.environment import isolated_env
from editors.lsp_stdio import mention_completion

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import Scenario

REPO = Path(__file__).resolve().parents[3]
EXTENSION = REPO / "editors" / "zed"
API_STAND_IN = Path(__file__).resolve().parent / "api_0_7"

MANIFEST_KEYS = {
    "id", "name", "version", "schema_version", "description", "repository", "authors", "lib", "themes",
    "icon_themes", "languages", "grammars", "language_servers", "context_servers", "agent_servers",
    "slash_commands", "snippets", "capabilities", "debug_adapters", "debug_locators",
}  # fmt: skip
LANGUAGE_SERVER_KEYS = {"language", "languages", "language_ids", "code_action_kinds"}
NEWEST_STABLE_API = (0, 7, 0)
"""The newest zed_extension_api stable Zed loads (its extension host's ``since_v0_6_0::MAX_VERSION``)."""
MIT_PATTERNS = (
    r"Copyright",
    r"Permission is hereby granted, free of charge, to any person obtaining a copy",
    r"The above copyright notice and this permission notice shall be included in all",
    r"THE SOFTWARE IS PROVIDED [\"“]AS IS[\"”], WITHOUT WARRANTY OF ANY KIND, EXPRESS OR",
)


def _manifest() -> dict[str, object]:
    return tomllib.loads((EXTENSION / "extension.toml").read_text(encoding="utf-8"))


def _lib_rs() -> str:
    return (EXTENSION / "src" / "lib.rs").read_text(encoding="utf-8")


def test_the_manifest_is_one_zed_loads_and_its_registry_accepts() -> None:
    manifest = _manifest()
    assert set(manifest) <= MANIFEST_KEYS, set(manifest) - MANIFEST_KEYS
    for key in ("id", "name", "version", "description", "repository"):
        assert isinstance(manifest[key], str) and manifest[key], key
    assert manifest["schema_version"] == 1
    assert isinstance(manifest["authors"], list) and all(isinstance(a, str) for a in manifest["authors"])
    # One version everywhere: the extension ships with the server it starts.
    assert manifest["version"] == dsh_session_reference.__version__
    # zed-industries/extensions' validateExtensionsToml and validateManifest.
    extension_id = str(manifest["id"])
    assert re.fullmatch(r"[a-z0-9\-]+", extension_id)
    assert not extension_id.startswith("zed-") and not extension_id.endswith("-zed")
    name = str(manifest["name"])
    assert not name.startswith("Zed ") and not name.endswith(" Zed")
    assert "zed" not in extension_id and "Zed" not in name
    assert str(manifest["repository"]).startswith("https://")

    servers = manifest["language_servers"]
    assert isinstance(servers, dict) and list(servers) == ["dsh-session-reference"]
    (entry,) = servers.values()
    assert set(entry) <= LANGUAGE_SERVER_KEYS, set(entry) - LANGUAGE_SERVER_KEYS
    assert entry["languages"] == ["Markdown"], "Zed's built-in Markdown language is named 'Markdown'"


def test_the_extension_carries_a_license_the_registry_accepts() -> None:
    """The registry refuses an extension without a license file of an accepted license
    (license.js: a file whose name starts with "license"/"licence", here MIT by its patterns)."""
    found = [path for path in EXTENSION.iterdir() if path.stem.lower().startswith(("license", "licence"))]
    assert [path.name for path in found] == ["LICENSE"]
    text = found[0].read_text(encoding="utf-8")
    assert all(re.search(pattern, text, re.IGNORECASE) for pattern in MIT_PATTERNS)
    assert text == (REPO / "LICENSE").read_text(encoding="utf-8")


def test_the_crate_is_a_cdylib_on_an_api_stable_zed_loads() -> None:
    cargo = tomllib.loads((EXTENSION / "Cargo.toml").read_text(encoding="utf-8"))
    assert cargo["lib"]["crate-type"] == ["cdylib"]
    assert cargo["package"]["edition"] == "2021"
    assert cargo["package"]["version"] == dsh_session_reference.__version__
    api = cargo["dependencies"]["zed_extension_api"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", api), api
    assert tuple(int(part) for part in api.split(".")) <= NEWEST_STABLE_API
    stand_in = tomllib.loads((API_STAND_IN / "Cargo.toml").read_text(encoding="utf-8"))
    assert stand_in["package"]["version"] == api, "the stand-in must be the API version the extension names"


def test_the_rust_glue_starts_the_server_the_manifest_registers() -> None:
    """Zed calls ``language_server_command`` with the manifest's server id; the glue answers with
    the console script ``pyproject.toml`` installs, and ``lsp``."""
    source = _lib_rs()
    (server,) = re.findall(r'const SERVER: &str = "([^"]+)";', source)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert server in pyproject["project"]["scripts"]
    assert server in _manifest()["language_servers"]  # type: ignore[operator]
    assert 'vec!["lsp".to_string()]' in source
    assert "zed::register_extension!(DshSessionReference);" in source
    for method in (
        "language_server_command",
        "language_server_initialization_options",
        "language_server_workspace_configuration",
    ):
        assert f"fn {method}(" in source, method


DEBIAN_CARGO = "/usr/bin/cargo"


def _runs(program: str) -> bool:
    try:
        return subprocess.run([program, "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def working_cargo() -> str | None:
    """The first cargo that runs with the rustc beside it, in ``scripts/install-system-deps``'
    order: each on PATH, then Debian's. rustup's proxies are on PATH with no toolchain for a fresh
    HOME, and fail; Debian's cargo would call them too, were it not given its own rustc."""
    found = [shutil.which("cargo", path=directory) for directory in os.get_exec_path()]
    for cargo in dict.fromkeys([*filter(None, found), DEBIAN_CARGO]):
        rustc = str(Path(cargo).with_name("rustc"))
        if os.access(cargo, os.X_OK) and _runs(cargo) and _runs(rustc):
            return cargo
    return None


def test_the_rust_glue_type_checks_against_the_api(tmp_path: Path) -> None:
    """``cargo check`` of a copy of the extension whose ``zed_extension_api`` is the stand-in for
    0.7.0 (its items and signatures, placeholder bodies), offline, warnings as errors."""
    cargo = working_cargo()
    assert cargo, "no cargo that runs: scripts/install-system-deps installs Debian's"
    rustc = str(Path(cargo).with_name("rustc"))
    copy = tmp_path / "zed"
    shutil.copytree(EXTENSION, copy, ignore=shutil.ignore_patterns("target", "Cargo.lock", "extension.wasm"))
    with (copy / "Cargo.toml").open("a", encoding="utf-8") as manifest:
        manifest.write(
            f"\n[patch.crates-io]\nzed_extension_api = {{ path = {json.dumps(str(API_STAND_IN))} }}\n"
        )
    env = {
        **os.environ,
        "CARGO_HOME": str(tmp_path / "cargo-home"),
        "CARGO_TARGET_DIR": str(tmp_path / "target"),
        "RUSTFLAGS": "-D warnings",
        "RUSTC": rustc,
    }
    run = subprocess.run(
        [cargo, "check", "--offline", "--quiet"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]


def test_zed_settings_reach_the_server(
    scenario: Scenario,
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    """The docs' Zed settings, as Zed passes them: ``initialization_options`` at initialize,
    ``settings`` for ``workspace/configuration``; the command is the glue's (the script on PATH,
    ``lsp``). ``@`` must list the store's sessions in dsh's order, the target excluded."""
    settings = json.loads(
        documented_config(
            "zed",
            {
                '"sessionsRoot": ""': f'"sessionsRoot": {json.dumps(str(scenario.sessions_root))}',
                '"targetSessionId": ""': f'"targetSessionId": {json.dumps(scenario.target_id)}',
            },
        )
    )
    entry = settings["lsp"]["dsh-session-reference"]
    path = f"{scenario.server_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    command = shutil.which("dsh-session-reference", path=path)
    assert command == str(scenario.server_bin / "dsh-session-reference")
    ids = mention_completion(
        [command, "lsp"],
        isolated_env(tmp_path / "home", path),
        scenario.workspace,
        scenario.prompt,
        entry["initialization_options"],
        entry["settings"],
        tmp_path / "server.log",
    )
    assert ids == [candidate.session_id for candidate in scenario.candidates]
