"""One build of ``vscode-client`` at a time across test workers.

``scripts/package`` (the packaging tests) and ``npm run package`` (the VS Code end-to-end tests)
both rewrite ``vscode-client/bundled`` and ``dist``; two workers building at once broke each
other's package (vsce: "currentLevel is undefined for work in …/bundled/manifest.json").
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def client_build() -> Iterator[None]:
    """Held while this checkout's ``vscode-client`` is built (a lock file outside the checkout,
    one per checkout, so two clones on one machine do not wait for each other)."""
    key = hashlib.sha256(str(REPO).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"dsh-session-reference-client-build-{key}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
