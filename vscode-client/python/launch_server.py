"""Starts the language server the extension ships, with the extension's own libraries.

The extension runs on whatever Python 3.11+ the user has, so it must not depend on what is
installed there. The pure-Python libraries the server was packaged with go first on sys.path
(they are exactly the versions it was tested with). The binary libraries (zstandard, ICU) go
last: they were built for the packaging machine, so an interpreter's own compatible build wins,
and ours is only a fallback. `--probe` reports the version and what imports, as one JSON line,
so the extension can explain a problem before it starts the server. This file must stay
parseable by old Pythons, so that they can say how old they are.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(os.path.dirname(HERE), "bundled")
MIN_VERSION = (3, 11)


def _arrange_sys_path() -> None:
    libs = os.path.join(BUNDLED, "libs")
    binary = os.path.join(BUNDLED, "binary")
    if HERE in sys.path:
        sys.path.remove(HERE)
    if os.path.isdir(libs):
        sys.path.insert(0, libs)
    if os.path.isdir(binary):
        sys.path.append(binary)


def _import_error(module: str) -> str | None:
    try:
        __import__(module)
    except Exception as error:  # any failure means the feature is unavailable
        return f"{type(error).__name__}: {error}"
    return None


def _zstd_error() -> str | None:
    """Why no Zstandard codec loads (Python 3.14's own, backports.zstd or zstandard), or None."""
    try:
        from dsh_session_reference.store.zstd_codec import codec

        codec()
    except Exception as error:  # any failure means compressed logs cannot be read
        return f"{type(error).__name__}: {error}"
    return None


def _probe() -> dict[str, object]:
    report: dict[str, object] = {
        "version": list(sys.version_info[:3]),
        "executable": sys.executable,
        "platform": f"{sys.platform}-{os.uname().machine if hasattr(os, 'uname') else ''}",
        "server_error": "Python is too old",
        "zstd_error": None,
        "icu_error": None,
    }
    if sys.version_info[:2] >= MIN_VERSION:
        report["server_error"] = _import_error("dsh_session_reference.lsp")
        report["zstd_error"] = _zstd_error()
        report["icu_error"] = _import_error("icu")
    return report


def main() -> None:
    _arrange_sys_path()
    if sys.argv[1:2] == ["--probe"]:
        sys.stdout.write(json.dumps(_probe()) + "\n")
        return
    sys.argv = ["dsh_session_reference", *sys.argv[1:]]
    runpy.run_module("dsh_session_reference", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
