"""Fixtures shared by the language-server tests (helpers live in ``lsp_support``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_support import default_specs, write_store


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workspace")
    (path / "notes.md").write_text("on disk\n")
    return path


@pytest.fixture(scope="session")
def store_root(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return write_store(tmp_path_factory.mktemp("sessions"), default_specs(str(workspace)))
