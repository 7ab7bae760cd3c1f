"""Both Zstandard backends, ``compression.zstd`` (here ``backports.zstd``) and ``zstandard``,
for the tests that touch Zstandard data, so each backend is proven on every run (see
store/zstd_codec.py).

The rule: a test runs once per backend when it reads or writes a ``.jsonl.zstd`` log or a
Zstandard frame, directly or through what it drives (a store, the CLI, a sample store, a
differential case or upstream-written store that may be Zstandard), even when today's reader
settles it without the codec (a bad magic number, a header frame read in memory): which of those
reach the codec is the reader's business and may change. Every other test (layout, JSON values,
collation, watching, argument parsing, pure API comparisons, plain logs) runs once, under
whatever backend the process picks.

A suite's conftest imports :func:`zstd_backend`; a test asks for both backends with
:data:`zstd` (``pytestmark = zstd`` for a whole module), and a test parametrized over a log's
encoding uses :data:`by_compression`, which runs the plain encoding once and ``zstd`` once per
backend. The backend is forced through ``DSH_SESSION_REFERENCE_ZSTD``, so subprocesses started
meanwhile (the CLI, index workers) inherit it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from dsh_session_reference.store.zstd_codec import BACKEND_ENV, codec

BACKENDS = ("stdlib", "zstandard")
Test = TypeVar("Test", bound=Callable[..., Any])


@pytest.fixture(params=BACKENDS)
def zstd_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str | None]:
    """The backend this test runs under, or ``None`` for a plain log (see :data:`by_compression`)."""
    backend: str | None = request.param
    if backend is None:
        yield None
        return
    monkeypatch.setenv(BACKEND_ENV, backend)
    codec.cache_clear()
    expected = ("zstandard",) if backend == "zstandard" else ("compression.zstd", "backports.zstd")
    assert codec().name in expected, (codec().name, backend)  # the backend really is the one named
    yield backend
    codec.cache_clear()


zstd = pytest.mark.usefixtures("zstd_backend")
"""Runs a test (a module, as its ``pytestmark``) once per backend."""

_COMPRESSIONS = pytest.mark.parametrize(
    ("compression", "zstd_backend"),
    [
        pytest.param("none", None, id="none"),
        *(pytest.param("zstd", backend, id=f"zstd-{backend}") for backend in BACKENDS),
    ],
    indirect=["zstd_backend"],
)


def by_compression(test: Test) -> Test:
    """For a test taking ``compression``: ``none`` once, ``zstd`` once per backend (an indirect
    parameter needs the fixture among the test's, hence :data:`zstd` as well)."""
    return _COMPRESSIONS(zstd(test))
