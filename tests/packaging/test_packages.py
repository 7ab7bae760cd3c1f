"""scripts/package builds every release artifact; each VS Code package holds only its platform's code.

The extension runs the server on the user's own Python with the libraries it carries, so a
package with another platform's ``zstandard`` would leave dsh's default ``.jsonl.zstd`` logs
unreadable there (an empty completion list on a Mac). Each binary is judged by its own file
header (ELF machine, Mach-O CPU types, PE machine), not by its name, and by its wheel's tags;
every CPython the extension supports below 3.14 must find a ``zstandard`` build (3.14 reads zstd
with the standard library).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.1.0"
CPYTHON = ("3.11", "3.12", "3.13", "3.14")
ZSTD_BELOW = "3.14"  # from here on the standard library reads zstd

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "arm64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}
PE_MACHINES = {0x8664: "x86_64", 0xAA64: "arm64"}
EXPECTED = {
    "linux-x64": ("elf", "x86_64"),
    "linux-arm64": ("elf", "arm64"),
    "darwin-x64": ("macho", "x86_64"),
    "darwin-arm64": ("macho", "arm64"),
    "win32-x64": ("pe", "x86_64"),
}


@functools.cache
def _bundler() -> ModuleType:
    """vscode-client/scripts/bundle_python.py, for its targets' platform tags."""
    path = REPO / "vscode-client" / "scripts" / "bundle_python.py"
    spec = importlib.util.spec_from_file_location("bundle_python", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def binary_kind(data: bytes) -> tuple[str, set[str]] | None:
    """The executable format of a file and the architectures it holds, from its header; None for
    anything that is not an executable or library."""
    if data[:4] == b"\x7fELF":
        order = "<" if data[5] == 1 else ">"
        (machine,) = struct.unpack_from(order + "H", data, 18)
        return "elf", {ELF_MACHINES.get(machine, hex(machine))}
    if data[:4] == b"\xcf\xfa\xed\xfe":  # 64-bit Mach-O, little-endian
        (cpu,) = struct.unpack_from("<I", data, 4)
        return "macho", {MACHO_CPUS.get(cpu, hex(cpu))}
    if data[:4] == b"\xca\xfe\xba\xbe":  # a universal (fat) Mach-O: one slice per architecture
        (count,) = struct.unpack_from(">I", data, 4)
        cpus = {struct.unpack_from(">I", data, 8 + 20 * index)[0] for index in range(count)}
        return "macho", {MACHO_CPUS.get(cpu, hex(cpu)) for cpu in cpus}
    if data[:2] == b"MZ":
        (offset,) = struct.unpack_from("<I", data, 0x3C)
        if data[offset : offset + 4] == b"PE\0\0":
            (machine,) = struct.unpack_from("<H", data, offset + 4)
            return "pe", {PE_MACHINES.get(machine, hex(machine))}
    return None


def _read(vsix: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(vsix) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_one_command_builds_the_wheel_the_sdist_and_every_package(packages: Path) -> None:
    names = sorted(path.name for path in packages.iterdir())
    assert names == sorted(
        [
            f"dsh_session_reference-{VERSION}-py3-none-any.whl",
            f"dsh_session_reference-{VERSION}.tar.gz",
            f"dsh-session-reference-{VERSION}.vsix",
            *(f"dsh-session-reference-{target}-{VERSION}.vsix" for target in EXPECTED),
        ]
    )


def test_the_header_check_tells_platforms_apart() -> None:
    """The checker itself, on this machine's own Python and on hand-made headers."""
    import zstandard.backend_c as native

    assert binary_kind(Path(native.__file__).read_bytes()[:4096]) == ("elf", {"x86_64"})
    assert binary_kind(b"\xcf\xfa\xed\xfe" + struct.pack("<I", 0x0100000C)) == ("macho", {"arm64"})
    fat = b"\xca\xfe\xba\xbe" + struct.pack(">I", 2) + struct.pack(">5I", 0x01000007, 3, 0, 0, 0)
    fat += struct.pack(">5I", 0x0100000C, 0, 0, 0, 0)
    assert binary_kind(fat) == ("macho", {"x86_64", "arm64"})
    pe = bytearray(256)
    pe[:2], pe[0x3C:0x40], pe[128:134] = b"MZ", struct.pack("<I", 128), b"PE\0\0" + struct.pack("<H", 0xAA64)
    assert binary_kind(bytes(pe)) == ("pe", {"arm64"})
    assert binary_kind(b"#!/usr/bin/env python\n") is None


@pytest.mark.parametrize("target", list(EXPECTED))
def test_each_platform_package_holds_only_its_own_binaries(packages: Path, target: str) -> None:
    files = _read(packages / f"dsh-session-reference-{target}-{VERSION}.vsix")
    manifest_xml = files["extension.vsixmanifest"].decode()
    assert f'TargetPlatform="{target}"' in manifest_xml
    manifest = json.loads(files["extension/bundled/manifest.json"])
    assert manifest["target"] == target

    fmt, arch = EXPECTED[target]
    binaries = {}
    for name, data in files.items():
        kind = binary_kind(data)
        if kind is not None:
            binaries[name] = kind
    assert binaries, f"{target}: no compiled library at all"
    wrong = {name: kind for name, kind in binaries.items() if kind[0] != fmt or arch not in kind[1]}
    assert wrong == {}, f"{target} carries binaries for another platform: {wrong}"
    assert all(name.startswith("extension/bundled/binary/") for name in binaries), sorted(binaries)

    # zstandard for every CPython below 3.14, by the version its extension module is built for.
    modules = [name for name in binaries if "/zstandard/backend_c." in name]
    versions = sorted({re.search(r"(?:cpython-|cp)3(\d+)", name).group(1) for name in modules})  # type: ignore[union-attr]
    assert [f"3.{minor}" for minor in versions] == [v for v in CPYTHON if v < ZSTD_BELOW], modules
    assert manifest["binary"]["zstandard"] == [v for v in CPYTHON if v < ZSTD_BELOW]

    # Every bundled wheel was chosen for this platform (its tags), as pip would on it.
    platform_tags = set(_bundler().TARGETS[target].platform_tags)
    wheels = [
        name for name in files if re.fullmatch(r"extension/bundled/binary/[^/]+\.dist-info/WHEEL", name)
    ]
    assert wheels
    for wheel in wheels:
        tags = re.findall(r"^Tag: (\S+)$", files[wheel].decode(), re.MULTILINE)
        assert tags and all(tag.split("-")[2] in platform_tags for tag in tags), (wheel, tags)

    # ICU has wheels for Linux x86-64 only: elsewhere the manifest says none were bundled.
    icu = manifest["binary"]["pyicu-wheels"]
    assert icu == (list(CPYTHON) if target == "linux-x64" else []), icu


def test_this_machines_package_imports_every_library_it_bundles(packages: Path, tmp_path: Path) -> None:
    """The server runs on the libraries inside the package and nothing else: each bundled binary
    must import with only what the package carries (watchfiles needs anyio, which pip installs
    only as a dependency, and binaries are bundled without theirs). It runs from the bytecode the
    package carries for the Python that built it: no module of the package is compiled at a start
    (the whole bundle was, on every start where the extension's folder is read-only or
    PYTHONDONTWRITEBYTECODE is set, and on the first start anywhere: 0.16 s of CPU)."""
    target = _bundler().host_target()
    files = _read(packages / f"dsh-session-reference-{target}-{VERSION}.vsix")
    for name, data in files.items():
        if name.startswith("extension/bundled/"):
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    bundled = tmp_path / "extension" / "bundled"
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert minor in json.loads((bundled / "manifest.json").read_text())["bytecode"]
    # The methods attrs compiles for lsprotocol's classes, kept (lsp/attrs_code.py).
    kept = f"lsp/__pycache__/lsprotocol-attrs.{sys.implementation.cache_tag}.marshal"
    assert (bundled / "libs" / "dsh_session_reference" / kept).is_file()
    code = (
        "import sys, importlib.machinery as m; sys.path[:0] = sys.argv[1:]; compiled = []; "
        "source_to_code = m.SourceFileLoader.source_to_code; "
        "m.SourceFileLoader.source_to_code = "
        "lambda self, data, path, **k: compiled.append(path) or source_to_code(self, data, path, **k); "
        "import watchfiles, zstandard, icu, pygls, lsprotocol; "
        "from dsh_session_reference.store.watch import RootWatcher; "
        "import dsh_session_reference.main, dsh_session_reference.lsp.features, "
        "dsh_session_reference.lsp.transport; "
        "print([path for path in compiled if path.startswith(tuple(sys.argv[1:]))])"
    )
    run = subprocess.run(
        [sys.executable, "-B", "-I", "-S", "-c", code, str(bundled / "libs"), str(bundled / "binary")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[]", f"compiled at the start: {run.stdout[:3000]}"


def test_the_universal_package_is_pure_python(packages: Path) -> None:
    files = _read(packages / f"dsh-session-reference-{VERSION}.vsix")
    assert "TargetPlatform" not in files["extension.vsixmanifest"].decode()
    assert [name for name, data in files.items() if binary_kind(data) is not None] == []
    manifest = json.loads(files["extension/bundled/manifest.json"])
    assert manifest["target"] == "universal"
    assert manifest["binary"] == {"zstandard": [], "pyicu-wheels": [], "watchfiles": []}
    assert any(name.startswith("extension/bundled/libs/pygls/") for name in files)
    assert "extension/bundled/libs/dsh_session_reference/store/zstd_codec.py" in files


def test_the_wheel_carries_the_server_and_no_tests(packages: Path) -> None:
    with zipfile.ZipFile(packages / f"dsh_session_reference-{VERSION}-py3-none-any.whl") as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"dsh_session_reference-{VERSION}.dist-info/METADATA").decode()
    assert "dsh_session_reference/lsp/server.py" in names
    assert not any(name.startswith("tests/") for name in names)
    assert 'Requires-Dist: zstandard>=0.23; python_version < "3.14"' in metadata


def test_one_version_everywhere_and_the_release_builds_with_the_tested_script(packages: Path) -> None:
    """The version is written once (``__version__``); the extension's manifest repeats it, and the
    release workflow builds with scripts/package, the script this test ran."""
    from dsh_session_reference import __version__

    assert __version__ == VERSION
    files = _read(packages / f"dsh-session-reference-{VERSION}.vsix")
    assert json.loads(files["extension/package.json"])["version"] == __version__
    # The icon the manifest names is in the package: a 128x128 PNG (drawn at build time).
    manifest = json.loads(files["extension/package.json"])
    icon = files["extension/" + manifest["icon"]]
    assert icon[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", icon[16:24]) == (128, 128)
    workflow = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert "run: scripts/package dist" in workflow
    with zipfile.ZipFile(packages / f"dsh_session_reference-{VERSION}-py3-none-any.whl") as wheel:
        metadata = wheel.read(f"dsh_session_reference-{VERSION}.dist-info/METADATA").decode()
        assert f"dsh_session_reference-{VERSION}.dist-info/licenses/LICENSE" in wheel.namelist()
    assert "License-Expression: MIT" in metadata
    assert "Requires-Dist: lsprotocol" not in metadata  # pygls pins the one it was built against


def test_the_lock_pins_every_dependency_within_pyproject() -> None:
    """requirements/dev.lock (scripts/lock) is what bootstrap and the bundle install: it must pin
    every runtime and dev requirement that applies here, inside pyproject's specifiers, with hashes."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock = (REPO / "requirements" / "dev.lock").read_text()
    pins = {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", lock, re.MULTILINE)
    }
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for spec in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        requirement = Requirement(spec)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements/dev.lock: run scripts/lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (spec, pins[name])
    blocks = re.split(r"^(?=[A-Za-z0-9])", lock, flags=re.MULTILINE)[1:]
    assert all("--hash=sha256:" in block for block in blocks), "every pin carries its hashes"
