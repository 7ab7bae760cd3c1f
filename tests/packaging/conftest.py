"""The release artifacts, built once per run by the script the release workflow runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from client_build import client_build

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every file ``scripts/package`` writes, for each packaging test module to read (building them
    takes minutes: once for the Marketplace checks and the Open VSX ones alike)."""
    out = tmp_path_factory.mktemp("dist")
    with client_build():
        run = subprocess.run(
            [str(REPO / "scripts" / "package"), str(out)],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return out
