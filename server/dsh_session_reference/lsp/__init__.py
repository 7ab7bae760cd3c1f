"""The language server: pygls wiring in :mod:`.server`, every feature a plain function.

Features take text, offsets and resolver results and return lsprotocol values,
so they are unit-tested without a client and shared with the CLI's ``check``.
"""
