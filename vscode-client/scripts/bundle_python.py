"""Fills vscode-client/bundled/ with the Python server and its libraries for the .vsix.

Why: the extension must work with nothing but a Python 3.11+ interpreter, like Microsoft's
Python-tools extension template, so the server and its dependencies travel inside the package.

- bundled/libs: the server package (copied from server/) and its pure-Python dependencies,
  taken from pyproject.toml (one list of dependencies for pip users and extension users alike)
  and installed with `pip install --target` as pure wheels only.
- bundled/binary: the dependencies that need compiled code (zstandard, pyicu-wheels, watchfiles), for one
  VS Code target (`--target linux-x64`, ...; default: this machine's) and each supported CPython
  minor version its markers apply to (their extension modules carry the version in the file
  name, so several coexist in one folder). `--target universal` bundles none. Where no wheel
  exists the server degrades (zstd logs unreadable before Python 3.14, collation approximated,
  the root checked instead of watched) and the extension says so.
- bytecode: every bundled module compiled, for each supported CPython found here (the one running
  this script at least), as hash-checked .pyc files (:func:`compile_bytecode`): the server would
  otherwise compile the whole bundle on its first start (0.16 s of CPU here, 0.56 s against 0.40 s
  for its imports) and on every start where the extension's folder is read-only or the
  environment sets PYTHONDONTWRITEBYTECODE.
- bundled/manifest.json: what was bundled, for the extension's messages and for people.

Every wheel is downloaded first and checked against requirements/dev.lock's hashes (the versions
and the files CI tested), then installed from that folder alone: a wheel the lock does not name,
or whose SHA-256 the lock does not list, stops the build (:func:`verify_wheels`).

Run from vscode-client/ by `npm run package` (this machine) or scripts/package (every target);
the Python running this script needs pip.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # pip always vendors packaging
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment, unused-ignore]
    from pip._vendor.packaging.utils import (  # type: ignore[assignment, unused-ignore]
        canonicalize_name,
        parse_wheel_filename,
    )

CLIENT = Path(__file__).resolve().parent.parent
REPO = CLIENT.parent
BUNDLED = CLIENT / "bundled"
LOCK = REPO / "requirements" / "dev.lock"
BINARY_DISTRIBUTIONS = {"zstandard", "pyicu-wheels", "watchfiles"}
PURE_DEPENDENCIES = {"watchfiles": ("anyio",)}
"""What a binary distribution imports that is pure Python: binaries are installed one wheel per
CPython with ``--no-deps``, so their dependencies go into bundled/libs with the pure ones (without
anyio, ``import watchfiles`` fails and the server cannot watch the sessions root)."""
CPYTHON_MINORS = ("3.11", "3.12", "3.13", "3.14")
PACKAGE = "dsh_session_reference"


@dataclass(frozen=True)
class Target:
    """A VS Code platform target: the marker values and wheel platform tags of its Pythons."""

    name: str
    sys_platform: str
    platform_system: str
    platform_machine: str
    platform_tags: tuple[str, ...]

    def environment(self, minor: str) -> dict[str, str]:
        """PEP 508 marker values of CPython ``minor`` on this target."""
        return {
            "python_version": minor,
            "python_full_version": f"{minor}.0",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "sys_platform": self.sys_platform,
            "platform_system": self.platform_system,
            "platform_machine": self.platform_machine,
            "os_name": "nt" if self.sys_platform == "win32" else "posix",
        }


def _manylinux(arch: str) -> tuple[str, ...]:
    return (*(f"manylinux_2_{minor}_{arch}" for minor in range(39, 16, -1)), f"manylinux2014_{arch}")


def _macos(arch: str, first: tuple[int, int]) -> tuple[str, ...]:
    versions = [(10, minor) for minor in range(15, first[1] - 1, -1)] if first[0] == 10 else []
    versions = [(major, 0) for major in range(15, 10, -1)] + versions
    return tuple(
        f"macosx_{major}_{minor}_{kind}" for major, minor in versions for kind in (arch, "universal2")
    )


TARGETS = {
    target.name: target
    for target in (
        Target("linux-x64", "linux", "Linux", "x86_64", _manylinux("x86_64")),
        Target("linux-arm64", "linux", "Linux", "aarch64", _manylinux("aarch64")),
        Target("darwin-x64", "darwin", "Darwin", "x86_64", _macos("x86_64", (10, 9))),
        Target("darwin-arm64", "darwin", "Darwin", "arm64", _macos("arm64", (11, 0))),
        Target("win32-x64", "win32", "Windows", "AMD64", ("win_amd64",)),
    )
}
"""The targets with compiled libraries; ``universal`` (any other platform) carries none."""


def host_target() -> str:
    machine = {"amd64": "x64", "x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform)
    name = f"{system}-{machine}"
    return name if name in TARGETS else "universal"


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(command, text=True, capture_output=True, check=False)


def checked_pip(*args: str) -> None:
    result = pip(*args)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"bundle_python: pip {' '.join(args[:2])} failed")


def project_requirements() -> list[Requirement]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [Requirement(spec) for spec in pyproject["project"]["dependencies"]]


def write_constraints(folder: Path) -> Path:
    """The versions requirements/dev.lock pins (hashes and markers dropped) as a pip constraints
    file: the bundle carries the versions CI tested, not whatever the index offers today."""
    pins = re.findall(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*==[^\s;\\]+)", LOCK.read_text(encoding="utf-8"), re.MULTILINE
    )
    path = folder / "constraints.txt"
    path.write_text("\n".join(pins) + "\n", encoding="utf-8")
    return path


def locked_hashes(lock_text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """``{name: (version, sha256 hashes)}`` from a pip-compile lock written with hashes."""
    locked: dict[str, tuple[str, frozenset[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock_text):
        pin = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", block)
        if pin is not None:
            hashes = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
            locked[canonicalize_name(pin.group(1))] = (pin.group(2), hashes)
    return locked


def verify_wheels(folder: Path, lock_text: str) -> list[str]:
    """Each file in ``folder`` must be a wheel of a distribution the lock pins, at its version, with
    a SHA-256 the lock lists; returns the wheels' names, or stops the build naming the first that
    is not (pip's ``--require-hashes`` would need the whole closure as hashed requirements; the lock
    already is that list)."""
    locked = locked_hashes(lock_text)
    checked = []
    for path in sorted(folder.iterdir()):
        if path.suffix != ".whl":
            raise SystemExit(f"bundle_python: {path.name} is not a wheel")
        name, version, _build, _tags = parse_wheel_filename(path.name)
        pinned = locked.get(canonicalize_name(name))
        if pinned is None:
            raise SystemExit(f"bundle_python: {path.name}: {name} is not in {LOCK.name}")
        if str(version) != pinned[0]:
            raise SystemExit(f"bundle_python: {path.name}: {LOCK.name} pins {name}=={pinned[0]}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in pinned[1]:
            raise SystemExit(f"bundle_python: {path.name}: sha256 {digest} is not one {LOCK.name} lists")
        checked.append(path.name)
    return checked


def fetch_verified(folder: Path, args: list[str]) -> None:
    """``pip download`` of ``args`` into ``folder``, then :func:`verify_wheels` against the lock."""
    checked_pip("download", "--dest", str(folder), "--only-binary=:all:", *args)
    verify_wheels(folder, LOCK.read_text(encoding="utf-8"))


def copy_server(libs: Path) -> None:
    source = REPO / "server" / PACKAGE
    shutil.copytree(source, libs / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def install_pure(libs: Path, requirements: list[Requirement], constraints: Path) -> None:
    # --implementation py accepts only pure wheels: a compiled dependency sneaking into
    # the pure list fails here instead of shipping a build for one Python only.
    selection = ["--implementation", "py", "--python-version", CPYTHON_MINORS[0]]
    selection += ["--constraint", str(constraints), *[str(req) for req in requirements]]
    with tempfile.TemporaryDirectory() as wheels:
        fetch_verified(Path(wheels), selection)
        checked_pip(
            "install",
            "--target",
            str(libs),
            "--no-index",
            "--find-links",
            wheels,
            "--only-binary=:all:",
            "--no-compile",
            "--upgrade",
            *selection,
        )


def merge_tree(source: Path, destination: Path) -> None:
    for item in source.rglob("*"):
        target = destination / item.relative_to(source)
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, target)


def install_binary(binary: Path, requirement: Requirement, target: Target, constraints: Path) -> list[str]:
    """Returns the CPython versions a wheel was bundled for (those the requirement's markers
    select on ``target``; a version without a wheel is said and skipped)."""
    bundled: list[str] = []
    platform_args = [arg for tag in target.platform_tags for arg in ("--platform", tag)]
    for minor in CPYTHON_MINORS:
        if requirement.marker is not None and not requirement.marker.evaluate(target.environment(minor)):
            continue
        selection = ["--no-deps", "--implementation", "cp", "--python-version", minor, *platform_args]
        selection += ["--constraint", str(constraints), str(requirement)]
        with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as wheels:
            result = pip("download", "--dest", wheels, "--only-binary=:all:", *selection)
            if result.returncode != 0:
                print(f"bundle_python: no {requirement.name} wheel for CPython {minor} on {target.name}")
                continue
            verify_wheels(Path(wheels), LOCK.read_text(encoding="utf-8"))
            checked_pip(
                "install",
                "--target",
                scratch,
                "--no-index",
                "--find-links",
                wheels,
                "--only-binary=:all:",
                "--no-compile",
                *selection,
            )
            merge_tree(Path(scratch), binary)
            bundled.append(minor)
    return bundled


def remove_clutter(folder: Path) -> None:
    for path in [*folder.rglob("__pycache__"), folder / "bin"]:
        if path.is_dir():
            shutil.rmtree(path)
    # zstandard's cffi backend needs the cffi package, which is not bundled; the C backend is
    # the one its default import policy loads.
    for path in [*folder.glob("zstandard/_cffi.*"), *folder.glob("zstandard/backend_cffi.py")]:
        path.unlink()


def strip_debug_info(folder: Path) -> None:
    """The Linux wheels' extension modules carry about 10 MB of debug sections each; users never
    need them.

    Only the extension modules are stripped: the vendored libraries in *.libs were rewritten by
    auditwheel's patchelf, and stripping such files can break them. A strip tool that does not
    know another architecture's ELF leaves that module as it is.
    """
    strip = shutil.which("strip")
    if strip is None:
        print("bundle_python: no strip tool; extension modules keep their debug sections")
        return
    for module in folder.rglob("*.cpython-*-linux-gnu.so"):
        result = subprocess.run([strip, "--strip-debug", str(module)], capture_output=True, check=False)
        if result.returncode != 0:
            print(f"bundle_python: {module.name} keeps its debug sections (strip cannot read it)")


def compile_bytecode(libs: Path, binary: Path) -> list[str]:
    """Compile every module in ``libs`` and ``binary`` with each CPython of :data:`CPYTHON_MINORS`
    this machine runs as ``python3.N`` (the one running this script at least), and have each keep
    the methods attrs compiles for lsprotocol's and pygls' classes (the server's
    ``lsp/attrs_code.py``, 0.1 s of every start otherwise); returns the versions compiled for.

    Hash-checked .pyc files: an installed extension's files carry the time they were unpacked, and a
    .pyc that records its source's time would be taken as stale on every start; this kind records
    the source's hash, which the interpreter checks at import (a read and a hash, no compile). The
    build folder is stripped from the file names they record, so no path of this machine ships."""
    folders = [libs, binary]
    keep_attrs_code = f"import sys; sys.path[:0] = {[str(libs), str(binary)]!r}; import {PACKAGE}.lsp"
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    # Beside the sources, wherever this shell keeps its own bytecode.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPYCACHEPREFIX"}
    compiled: list[str] = []
    for minor in CPYTHON_MINORS:
        python = sys.executable if minor == own else shutil.which(f"python{minor}")
        if python is None:
            continue
        probe = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if probe.returncode != 0 or probe.stdout.strip() != minor:
            continue  # a launcher that does not run that version here
        for folder in folders:
            args = ["-m", "compileall", "-q", "--invalidation-mode", "checked-hash", "-s", str(folder)]
            command = [python, *args, str(folder)]
            result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if result.returncode != 0:
                sys.stderr.write(result.stdout + result.stderr)
                raise SystemExit(f"bundle_python: compiling {folder.name} with Python {minor} failed")
        # -I: this environment's bytecode settings do not apply; the file goes beside the .pyc files.
        command = [python, "-I", "-c", keep_attrs_code]
        kept = subprocess.run(command, capture_output=True, text=True, check=False)
        if kept.returncode != 0:
            sys.stderr.write(kept.stdout + kept.stderr)
            raise SystemExit(f"bundle_python: importing the server's LSP package with Python {minor} failed")
        compiled.append(minor)
    return compiled


def main() -> None:
    parser = argparse.ArgumentParser(description="Fill vscode-client/bundled/ for one VS Code target.")
    parser.add_argument("--target", choices=[*TARGETS, "universal"], default=host_target())
    target_name = parser.parse_args().target
    target = TARGETS.get(target_name)
    if BUNDLED.exists():
        shutil.rmtree(BUNDLED)
    libs = BUNDLED / "libs"
    binary = BUNDLED / "binary"
    libs.mkdir(parents=True)
    binary.mkdir()

    requirements = project_requirements()
    pure = [req for req in requirements if req.name not in BINARY_DISTRIBUTIONS]
    compiled = [req for req in requirements if req.name in BINARY_DISTRIBUTIONS]
    pure += [Requirement(name) for req in compiled for name in PURE_DEPENDENCIES.get(req.name, ())]

    copy_server(libs)
    with tempfile.TemporaryDirectory() as scratch:
        constraints = write_constraints(Path(scratch))
        install_pure(libs, pure, constraints)
        binaries: dict[str, list[str]] = {}
        for requirement in compiled:
            binaries[requirement.name] = (
                [] if target is None else install_binary(binary, requirement, target, constraints)
            )
    remove_clutter(libs)
    remove_clutter(binary)
    strip_debug_info(binary)
    bytecode = compile_bytecode(libs, binary)

    manifest = {
        "target": target_name,
        "cpython": list(CPYTHON_MINORS),
        "pure": sorted(path.name for path in libs.glob("*.dist-info")),
        "binary": binaries,
        "bytecode": bytecode,
    }
    (BUNDLED / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(
        f"bundle_python: {target_name}: {len(manifest['pure'])} pure distributions; binary: {binaries}; "
        f"bytecode for CPython {', '.join(bytecode)}"
    )


if __name__ == "__main__":
    main()
