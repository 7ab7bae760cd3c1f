"""The language server: shared services in :mod:`.server`, each feature an object in :mod:`.features` with a
declared contract (:mod:`.contract`).

What a feature computes is a pure function of text, offsets and core results (:mod:`..analysis`,
the resolver) returning lsprotocol values, unit-tested without a client; this package imports the core,
:mod:`..assembly`, lsprotocol and pygls (and attrs, lsprotocol's own, in :mod:`.attrs_code`), and
nothing of the store or the CLI. lsprotocol's types and pygls are imported first here, with the
methods attrs compiles for their classes taken from the bytecode kept beside this package's
(:mod:`.attrs_code`).
"""

from .attrs_code import compiled_once

with compiled_once():  # imported first here: their attrs classes' methods from kept bytecode
    import lsprotocol.types  # noqa: F401
    import pygls.lsp.server  # noqa: F401  (pygls' JSON-RPC messages and cattrs' classes too)
