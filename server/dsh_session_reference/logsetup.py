"""The language server's own log: how much (``--log-level``, else ``$DSH_LSP_LOG``, else
WARNING) and where (``--log-file``, else stderr, which editors show as the server's output).

The environment variable is read from the editor's environment, where a typo is easy to make
and hard to see: a bad value is a clear usage error naming the variable, never a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Final

LOG_ENV: Final = "DSH_LSP_LOG"
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMAT: Final = "%(levelname)s %(name)s: %(message)s"


def log_level(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The level: the flag's (argparse has checked it), else ``$DSH_LSP_LOG``, else WARNING.

    Raises ``ValueError`` naming the variable and the levels for any other value.
    """
    if flag:
        return flag
    raw = (os.environ if environ is None else environ).get(LOG_ENV, "")
    value = raw.strip().upper()
    if not value:
        return "WARNING"
    if value not in LOG_LEVELS:
        raise ValueError(f"{LOG_ENV} must be one of {', '.join(LOG_LEVELS)} (any case), not {raw!r}")
    return value


def configure(level: str, log_file: str | None) -> None:
    """Send the log to ``log_file`` (appended) or stderr. Opening the file is the caller's
    first failure point: an ``OSError`` here names the path."""
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
