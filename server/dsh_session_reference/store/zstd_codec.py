"""The Zstandard codec dsh's ``.jsonl.zstd`` logs are read (and, in tests, written) with.

dsh writes zstd logs by default, so a Python that cannot decode them sees an empty store.
The compiled ``zstandard`` binding is used where it is installed (the package depends on it
below Python 3.14); the standard library decodes them from Python 3.14 on
(``compression.zstd``, PEP 784), and ``backports.zstd`` publishes the same module for older
Pythons. So a Python 3.14 needs no compiled wheel at all (the VS Code extension's packages
then work on any platform), and one interface here keeps the log reader free of the difference.
``zstandard`` goes first because dsh writes one frame per append: it decodes a run of frames in
one native call and reuses its context, where the standard library's module makes a decoder per
frame (a cold title read of every log took 4.5 s per 157 MB of JSONL with it, 3.6 s with
``zstandard``).

Both backends wrap the same libzstd, and the reader relies on what they share: a one-frame
decoder with ``decompress``, ``eof`` and ``unused_data``; zstandard also decodes consecutive
complete frames in one native call, which the reader uses when it is there.
``DSH_SESSION_REFERENCE_ZSTD`` (``stdlib`` or ``zstandard``) forces one, so the test suite
proves both on every run.

The import happens on first use of a zstd log: plain logs must keep working where neither is
installed, and a zstd log then fails like any unreadable log, naming it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Protocol

BACKEND_ENV: Final = "DSH_SESSION_REFERENCE_ZSTD"
"""Forces a backend: ``stdlib`` (``compression.zstd`` or ``backports.zstd``) or ``zstandard``."""

STDLIB_MODULES: Final = ("compression.zstd", "backports.zstd")
"""Where the standard library's codec lives: Python 3.14+, then its backport (same API)."""

MISSING: Final = (
    "no Zstandard decoder is installed (Python 3.14+, or the package backports.zstd or zstandard)"
)


class CodecMissing(Exception):
    """Neither backend can be imported (or the one ``DSH_SESSION_REFERENCE_ZSTD`` names cannot)."""


class FrameDecoder(Protocol):
    """One frame's incremental decoder: what both backends' decoders share."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes) -> bytes: ...


@dataclass(frozen=True)
class Codec:
    """One backend behind the operations the store needs."""

    name: str
    """``compression.zstd``, ``backports.zstd`` or ``zstandard``: said in messages and probes."""
    error: type[Exception]
    """What a corrupt frame raises."""
    frame_decoder: Callable[[], AbstractContextManager[FrameDecoder]]
    """A fresh decoder for one frame, for the ``with`` block that uses it."""
    decode_frames: Callable[[bytes], bytes] | None
    """The plaintext of consecutive complete frames in one native call (raises ``error`` if one
    fails), or ``None``: the standard library's codec decodes many frames in a Python loop that
    copies the input left after each frame, so callers hand it one frame at a time (dsh logs are
    one frame per append, often hundreds of thousands)."""
    compress: Callable[[Iterable[bytes], int], list[bytes]]
    """One checksummed frame per part, at a level (upstream's writer: one frame per append)."""


def _stdlib(module: ModuleType) -> Codec:
    checksum = {module.CompressionParameter.checksum_flag: 1}

    def compress(parts: Iterable[bytes], level: int) -> list[bytes]:
        options = {**checksum, module.CompressionParameter.compression_level: level}
        return [module.compress(part, options=options) for part in parts]

    @contextlib.contextmanager
    def frame_decoder() -> Iterator[FrameDecoder]:
        yield module.ZstdDecompressor()

    return Codec(module.__name__, module.ZstdError, frame_decoder, None, compress)


_IDLE = threading.local()
"""This thread's idle ``zstandard.ZstdDecompressor``: creating one costs ~15 us and a dsh log is
one frame per append, so each thread reuses one (``decompressobj`` resets it). Its decoders share
its context, so it is taken out while one is in use: a decode started during another makes its own."""


def _zstandard(module: ModuleType) -> Codec:
    @contextlib.contextmanager
    def frame_decoder() -> Iterator[FrameDecoder]:
        context = _IDLE.__dict__.pop("context", None) or module.ZstdDecompressor()
        try:
            yield context.decompressobj()
        finally:
            _IDLE.context = context

    def decode_frames(data: bytes) -> bytes:
        decoder: Any = module.ZstdDecompressor().decompressobj(read_across_frames=True)
        return decoder.decompress(data)  # type: ignore[no-any-return]

    def compress(parts: Iterable[bytes], level: int) -> list[bytes]:
        compressor = module.ZstdCompressor(level=level, write_checksum=True)
        return [compressor.compress(part) for part in parts]

    return Codec("zstandard", module.ZstdError, frame_decoder, decode_frames, compress)


@functools.cache
def codec() -> Codec:
    """The backend for this process: ``zstandard`` when importable, else the standard library's.

    Raises :class:`CodecMissing` (with :data:`MISSING`, or why a forced backend failed) when
    neither can be imported, and ``ValueError`` for an unknown ``DSH_SESSION_REFERENCE_ZSTD``.
    """
    forced = os.environ.get(BACKEND_ENV, "")
    choices = {"": ("zstandard", *STDLIB_MODULES), "stdlib": STDLIB_MODULES, "zstandard": ("zstandard",)}
    if forced not in choices:
        raise ValueError(f"{BACKEND_ENV} must be stdlib or zstandard, not {forced!r}")
    names = choices[forced]
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return _zstandard(module) if name == "zstandard" else _stdlib(module)
    if forced:
        raise CodecMissing(f"{BACKEND_ENV}={forced}, but {' and '.join(names)} cannot be imported")
    raise CodecMissing(MISSING)
