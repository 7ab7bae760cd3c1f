"""The language server: state in :mod:`.server`, handlers in :mod:`.features`, every feature a plain function.

Features take text, offsets and core results (:mod:`..analysis`, the resolver) and return
lsprotocol values, so they are unit-tested without a client; this package imports the core,
:mod:`..assembly`, lsprotocol and pygls, and nothing of the store or the CLI.
"""
