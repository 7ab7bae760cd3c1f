"""Fixtures shared by the language-server tests (helpers live in ``lsp_support``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_support import Session, default_specs, write_store
from pytest_lsp import LanguageClient


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workspace")
    (path / "notes.md").write_text("on disk\n")
    return path


@pytest.fixture(scope="session")
def store_root(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return write_store(tmp_path_factory.mktemp("sessions"), default_specs(str(workspace)))


@pytest.fixture
def s(lsp: LanguageClient) -> Session:
    """The session of the module's ``lsp`` server (see ``lsp_support.serving``)."""
    return lsp.session  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def store(lsp: LanguageClient) -> Path:
    """The store the module's ``lsp`` server was started on, when it made its own."""
    return lsp.store  # type: ignore[attr-defined,no-any-return]
