"""The methods attrs writes for lsprotocol's classes, kept compiled beside this package's bytecode.

``import lsprotocol.types`` makes about 560 attrs classes, and attrs writes each one's ``__init__``,
``__eq__`` and the rest as source and compiles it, every time the module is imported: 115 ms of
the 230 ms that import takes (pygls' and cattrs' own classes a few more), of the 0.4 s of imports
before ``initialize``, on cores an editor's start shares.
The code compiled is the same for the same source, so it is kept where Python keeps this package's
own bytecode (``__pycache__``, or ``sys.pycache_prefix``), and the next start compiles none of it.

The file is code this process runs, so it is read only from where this package's ``.pyc`` files
are, as trusted as they are, never from the cache folder; it is written as Python writes bytecode
(not where ``sys.dont_write_bytecode`` is set; a folder that cannot be written keeps none). An
entry counts only for the exact source and file name attrs compiles and this interpreter's
bytecode version: anything else (a new attrs or lsprotocol) is compiled as before, and the file
then keeps what this start used. A ``__hash__`` attrs writes carries the hash of a name, which
changes with each interpreter's hash seed (:data:`TYPE_HASH`): its entry never matches, it is
compiled on each start, and it is no reason to write the file again (one cattrs class had every
start rewrite the whole file, 1.8 MB, before the server could answer ``initialize``).
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import marshal
import os
import re
import sys
from collections.abc import Iterator
from types import CodeType
from typing import Final

import attr._make

MAGIC: Final = importlib.util.MAGIC_NUMBER
"""This interpreter's bytecode version, which the file must carry."""
_compile = builtins.compile
TYPE_HASH: Final = re.compile(r"(hash\(\(\n[ \t]*)-?\d+,")
"""The value opening the tuple a ``__hash__`` of attrs hashes: ``hash()`` of a name, this process's."""


def _seedless(key: str) -> str:
    """``key`` with :data:`TYPE_HASH`'s value left out: the same for every hash seed."""
    return TYPE_HASH.sub(r"\1#,", key)


def code_file() -> str | None:
    """Where the compiled methods are kept: beside this module's own bytecode (``None`` where
    this interpreter keeps none)."""
    try:
        own = importlib.util.cache_from_source(__file__)
    except NotImplementedError:  # no cache tag: this interpreter writes no bytecode
        return None
    return os.path.join(os.path.dirname(own), f"lsprotocol-attrs.{sys.implementation.cache_tag}.marshal")


def _read(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as file:
            if file.read(len(MAGIC)) != MAGIC:
                return {}
            kept = marshal.load(file)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if type(kept) is not dict:
        return {}
    return {key: code for key, code in kept.items() if type(key) is str and type(code) is CodeType}


def _write(path: str, used: dict[str, CodeType]) -> None:
    """Write ``used`` as the file, whole or not at all (another process may be reading it)."""
    scratch = f"{path}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(MAGIC)
                marshal.dump(used, file)
            os.replace(scratch, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(scratch)
            raise
    except OSError:
        return  # a folder this user cannot write: the next start compiles again


@contextlib.contextmanager
def compiled_once() -> Iterator[None]:
    """While this runs, what attrs compiles is taken from the file where it is there, and the file
    is brought up to what was compiled when it ends."""
    path = code_file()
    if path is None or getattr(attr._make, "compile", None) is not None:
        yield  # nowhere to keep it, or attrs' compile already taken over (a nested use)
        return
    kept = _read(path)
    seedless: set[str] | None = None  # made at the first miss: a scan of every source
    used: dict[str, CodeType] = {}
    missed = False

    def compile_kept(source: object, filename: str, mode: str, *args: object, **kwargs: object) -> object:
        nonlocal missed, seedless
        if mode != "exec" or args or kwargs or type(source) is not str:
            return _compile(source, filename, mode, *args, **kwargs)  # type: ignore[call-overload]
        key = f"{filename}\0{source}"
        code = kept.get(key)
        if code is None:
            code = _compile(source, filename, mode)
            if seedless is None:
                seedless = {_seedless(known) for known in kept if "hash((" in known}
            missed = missed or _seedless(key) not in seedless  # else only a hash seed differs
        used[key] = code
        return code

    attr._make.compile = compile_kept  # type: ignore[attr-defined]
    try:
        yield
    finally:
        del attr._make.compile  # type: ignore[attr-defined]
    if used and (missed or len(used) != len(kept)) and not sys.dont_write_bytecode:
        _write(path, used)
