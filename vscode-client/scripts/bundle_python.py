"""Fills vscode-client/bundled/ with the Python server and its libraries for the .vsix.

Why: the extension must work with nothing but a Python 3.11+ interpreter, like Microsoft's
Python-tools extension template, so the server and its dependencies travel inside the package.

- bundled/libs: the server package (copied from server/) and its pure-Python dependencies,
  taken from pyproject.toml (one list of dependencies for pip users and extension users alike)
  and installed with `pip install --target` as pure wheels only.
- bundled/binary: the dependencies that need compiled code (zstandard, pyicu-wheels), for this
  machine's platform and each supported CPython minor version (their extension modules carry
  the version in the file name, so several coexist in one folder). Where no wheel exists the
  server degrades (zstd logs unreadable, collation approximated) and the extension says so.
- bundled/manifest.json: what was bundled, for the extension's messages and for people.

Run from vscode-client/ by `npm run package`; the Python running this script needs pip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

try:
    from packaging import tags
    from packaging.requirements import Requirement
except ImportError:  # pip always vendors packaging
    from pip._vendor.packaging import tags  # type: ignore[no-redef, unused-ignore]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment, unused-ignore]

CLIENT = Path(__file__).resolve().parent.parent
REPO = CLIENT.parent
BUNDLED = CLIENT / "bundled"
BINARY_DISTRIBUTIONS = {"zstandard", "pyicu-wheels"}
CPYTHON_MINORS = ("3.11", "3.12", "3.13", "3.14")
PACKAGE = "dsh_session_reference"


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


def copy_server(libs: Path) -> None:
    source = REPO / "server" / PACKAGE
    shutil.copytree(source, libs / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def install_pure(libs: Path, requirements: list[Requirement]) -> None:
    # --implementation py accepts only pure wheels: a compiled dependency sneaking into
    # the pure list fails here instead of shipping a build for one Python only.
    checked_pip(
        "install",
        "--target",
        str(libs),
        "--only-binary=:all:",
        "--implementation",
        "py",
        "--python-version",
        CPYTHON_MINORS[0],
        "--no-compile",
        "--upgrade",
        *[str(req) for req in requirements],
    )


def merge_tree(source: Path, destination: Path) -> None:
    for item in source.rglob("*"):
        target = destination / item.relative_to(source)
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, target)


def install_binary(binary: Path, requirement: Requirement) -> list[str]:
    """Returns the CPython versions a wheel was bundled for."""
    platforms = list(dict.fromkeys(tags.platform_tags()))
    bundled: list[str] = []
    for minor in CPYTHON_MINORS:
        with tempfile.TemporaryDirectory() as scratch:
            platform_args = [arg for platform in platforms for arg in ("--platform", platform)]
            result = pip(
                "install",
                "--target",
                scratch,
                "--only-binary=:all:",
                "--no-deps",
                "--no-compile",
                "--implementation",
                "cp",
                "--python-version",
                minor,
                *platform_args,
                str(requirement),
            )
            if result.returncode != 0:
                print(f"bundle_python: no {requirement.name} wheel for CPython {minor} on {platforms[0]}")
                continue
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
    """The wheels' extension modules carry about 10 MB of debug sections each; users never need them.

    Only the extension modules are stripped: the vendored libraries in *.libs were rewritten by
    auditwheel's patchelf, and stripping such files can break them.
    """
    strip = shutil.which("strip")
    if strip is None:
        print("bundle_python: no strip tool; extension modules keep their debug sections")
        return
    for module in folder.rglob("*.cpython-*.so"):
        subprocess.run([strip, "--strip-debug", str(module)], check=True)


def main() -> None:
    if BUNDLED.exists():
        shutil.rmtree(BUNDLED)
    libs = BUNDLED / "libs"
    binary = BUNDLED / "binary"
    libs.mkdir(parents=True)
    binary.mkdir()

    requirements = project_requirements()
    pure = [req for req in requirements if req.name not in BINARY_DISTRIBUTIONS]
    compiled = [req for req in requirements if req.name in BINARY_DISTRIBUTIONS]

    copy_server(libs)
    install_pure(libs, pure)
    binaries: dict[str, list[str]] = {}
    for requirement in compiled:
        if requirement.marker is not None and not requirement.marker.evaluate():
            print(f"bundle_python: {requirement.name} does not apply to this platform; not bundled")
            binaries[requirement.name] = []
            continue
        binaries[requirement.name] = install_binary(binary, requirement)
    remove_clutter(libs)
    remove_clutter(binary)
    strip_debug_info(binary)

    manifest = {
        "platform": next(iter(tags.platform_tags())),
        "pure": sorted(path.name for path in libs.glob("*.dist-info")),
        "binary": binaries,
    }
    (BUNDLED / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"bundle_python: {len(manifest['pure'])} pure distributions; binary: {binaries}")


if __name__ == "__main__":
    main()
