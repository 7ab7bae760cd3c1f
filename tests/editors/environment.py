"""The environment every real editor runs in during the end-to-end tests, made once."""

from __future__ import annotations

import os
from pathlib import Path


def isolated_env(home: Path, path: str, *, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """An editor's environment: the user's own config, caches and sessions must not leak in (or be
    written to), and the server comes from its installed environment alone (no ``PYTHON*`` into
    the clone). ``drop``: the editor's own variables to leave out; ``extra``: variables to set."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", "DSH_", "PYTHON", *drop))
    }
    for name in ("config", "cache", "data", "state"):
        (home / name).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        DSH_HOME=str(home / "dsh"),
        PATH=path,
        **extra,
    )
    return env
