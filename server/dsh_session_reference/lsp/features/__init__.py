"""The LSP features, each an object with a declared contract (:class:`..contract.Feature`), and
the server made of them.

Each feature registers its own methods and commands, with their options; :func:`create_server`
only makes the server and installs the features in :data:`FEATURES`, whose order is the order
the server tells them of its events (diagnostics are pushed before hints are refreshed).
"""

from __future__ import annotations

from typing import Final

from ..commands import Commands
from ..contract import Feature, root_errors, wrapped
from ..send import Send
from ..server import DshLanguageServer
from .actions import CodeActions
from .completion import Completion
from .content import Content
from .diagnostics import Diagnostics
from .hover import Hover
from .inline import InlineCosts
from .lifecycle import Lifecycle
from .places import Places

FEATURES: Final[tuple[type[Feature], ...]] = (
    Lifecycle,
    Diagnostics,
    Completion,
    Hover,
    CodeActions,
    Content,
    Places,
    InlineCosts,
    Commands,
    Send,
)


def install(server: DshLanguageServer, feature: Feature) -> None:
    """Register what ``feature`` declares on ``server`` and tell it the server's events."""
    for handler in feature.handlers():
        function = root_errors(server, handler.function) if handler.reads_store else handler.function
        server.feature(handler.method, handler.options)(wrapped(function))
    for name, command in feature.commands().items():
        server.command(name)(wrapped(command))
    server.features.append(feature)


def create_server(sessions: str | None = None) -> DshLanguageServer:
    """A server with every feature installed (not started)."""
    server = DshLanguageServer(sessions)
    for kind in FEATURES:
        install(server, kind(server))
    return server
