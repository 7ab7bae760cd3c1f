"""Both Zstandard backends over a whole suite: ``compression.zstd`` (here ``backports.zstd``) and
``zstandard``, so each is proven on every run (see store/zstd_codec.py).

A suite's conftest imports :func:`zstd_backend`; being autouse and parametrized, it runs each of
the suite's tests once per backend, forced through ``DSH_SESSION_REFERENCE_ZSTD`` (worker
processes started meanwhile inherit it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_session_reference.store.zstd_codec import BACKEND_ENV, codec


@pytest.fixture(autouse=True, params=["stdlib", "zstandard"])
def zstd_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(BACKEND_ENV, request.param)
    codec.cache_clear()
    expected = ("zstandard",) if request.param == "zstandard" else ("compression.zstd", "backports.zstd")
    assert codec().name in expected, (codec().name, request.param)  # the backend really is the one named
    yield request.param
    codec.cache_clear()
