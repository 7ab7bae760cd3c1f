"""lsprotocol's and pygls' classes get their methods from the code kept beside this package's
bytecode (:mod:`dsh_session_reference.lsp.attrs_code`): attrs compiled them on every start (115 ms
of the 0.4 s of imports before a server answers ``initialize``). Each run is a fresh interpreter with its bytecode in a
folder of its own (``PYTHONPYCACHEPREFIX``), as an installed package keeps it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = """
import builtins, json, sys
compiled = []
compile_source = builtins.compile
def counted(source, filename, *args, **kwargs):
    name = str(filename)  # <attrs generated init lsprotocol.types.Position>
    if name.startswith("<attrs generated") and (" lsprotocol." in name or " pygls." in name):
        compiled.append(name)
    return compile_source(source, filename, *args, **kwargs)
builtins.compile = counted
import dsh_session_reference.lsp
from dsh_session_reference.lsp import attrs_code
from lsprotocol import types
from pygls.protocol import default_converter
position = types.Position(line=1, character=2)
params = default_converter().structure(
    {"textDocument": {"uri": "file:///p.md"}, "position": {"line": 0, "character": 1}},
    types.CompletionParams,
)
print(json.dumps({
    "compiled": len(compiled),
    "file": attrs_code.code_file(),
    "behaves": [repr(position), position == types.Position(line=1, character=2), repr(params)],
}))
"""


def probe(bytecode: Path, **env: str) -> dict[str, Any]:
    """One interpreter importing the server's LSP package with its bytecode under ``bytecode``."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    run = subprocess.run(
        [sys.executable, "-P", "-c", PROBE],
        env={**environment, "PYTHONPYCACHEPREFIX": str(bytecode), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_the_second_start_compiles_nothing_for_lsprotocol_and_its_classes_behave_the_same(
    tmp_path: Path,
) -> None:
    first = probe(tmp_path)
    assert first["compiled"] > 500  # attrs' compile is the one taken over: it was called here
    kept = Path(first["file"])
    assert kept.is_file() and kept.is_relative_to(tmp_path)  # beside this package's bytecode
    second = probe(tmp_path)
    assert second["compiled"] == 0
    assert second["behaves"] == first["behaves"]


def test_a_file_that_is_not_kept_code_is_compiled_over(tmp_path: Path) -> None:
    """A damaged or foreign file is not code this interpreter wrote: compiled as before, then
    replaced by what this start compiled."""
    first = probe(tmp_path)
    kept = Path(first["file"])
    for damaged in (b"", b"garbage", kept.read_bytes()[:1000], b"\0\0\0\0" + kept.read_bytes()[4:]):
        kept.write_bytes(damaged)
        again = probe(tmp_path)
        assert again["compiled"] == first["compiled"] and again["behaves"] == first["behaves"]
        assert probe(tmp_path)["compiled"] == 0


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    first = probe(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert first["compiled"] > 500
    assert not Path(first["file"]).exists()
    assert probe(tmp_path, PYTHONDONTWRITEBYTECODE="1")["compiled"] == first["compiled"]


def test_a_start_under_another_hash_seed_leaves_the_file_as_it_is(tmp_path: Path) -> None:
    """A ``__hash__`` attrs writes (cattrs' frozen classes) carries a value of the interpreter's hash
    seed, random per process: that method is compiled on each start, and the file is not written
    again for it (every start rewrote all 1.8 MB of it, before answering ``initialize``)."""
    first = probe(tmp_path, PYTHONHASHSEED="1")
    kept = Path(first["file"])
    before = kept.stat()
    second = probe(tmp_path, PYTHONHASHSEED="2")
    after = kept.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert second["compiled"] == 0 and second["behaves"] == first["behaves"]
