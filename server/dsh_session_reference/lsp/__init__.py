"""The language server: shared services in :mod:`.server`, each feature an object in :mod:`.features` with a
declared contract (:mod:`.contract`).

What a feature computes is a pure function of text, offsets and core results (:mod:`..analysis`,
the resolver) returning lsprotocol values, unit-tested without a client; this package imports the core,
:mod:`..assembly`, lsprotocol and pygls, and nothing of the store or the CLI.
"""
