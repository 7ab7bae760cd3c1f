"""What an editor shows of a line whose mentions read as chips, computed with the library's scanner."""

from __future__ import annotations

from dsh_session_reference.uri import scan_session_references

STALE_LABEL = "earlier work"
"""The label of the scenario prompt's noncanonical mention: not its session's title, so once its URI
is fixed it is a sound mention with a ``stale-label`` warning, written out rather than drawn as a
chip (as a chip it would read as a session other than the one it sends)."""


def as_chips(line: str) -> str:
    """``line`` with each valid labelled mention as ``@`` and its label as written: the ``[`` and the
    ``](dsh-session:...)`` out of sight, as the VS Code extension and the documented Neovim setup
    show a mention the server judged sound."""
    shown, at = [], 0
    for span in scan_session_references(line):
        if span.valid and span.kind == "markdown" and span.raw_label:
            shown += [line[at : span.start], "@", span.raw_label]
            at = span.end
    return "".join([*shown, line[at:]])
