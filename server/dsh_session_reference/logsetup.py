"""What the tools tell people about their own work: the language server's log, how much
(``--log-level``, else ``$DSH_LSP_LOG``, else WARNING) and where (``--log-file``, else stderr,
which editors show as the server's output), and when long work starts to show progress.

The environment is the editor's, where a typo is easy to make and hard to see: a bad log level
is a clear usage error naming the variable, a bad progress delay falls back to the default;
never a traceback.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import sys
from typing import Final, TextIO

LOG_ENV: Final = "DSH_LSP_LOG"
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMAT: Final = "%(levelname)s %(name)s: %(message)s"
PROGRESS_ENV: Final = "DSH_PROGRESS_AFTER"
PROGRESS_AFTER_DEFAULT: Final = 0.5


def log_level(flag: str | None) -> str:
    """The level: the flag's (argparse has checked it), else ``$DSH_LSP_LOG``, else WARNING.

    Raises ``ValueError`` naming the variable and the levels for any other value.
    """
    if flag:
        return flag
    raw = os.environ.get(LOG_ENV, "")
    value = raw.strip().upper()
    if not value:
        return "WARNING"
    if value not in LOG_LEVELS:
        raise ValueError(f"{LOG_ENV} must be one of {', '.join(LOG_LEVELS)} (any case), not {raw!r}")
    return value


def configure(level: str, log_file: str | None) -> None:
    """Send the log to ``log_file`` (appended) or stderr. Raises ``OSError`` when the file
    cannot be opened or is not a regular file: it is opened without blocking, so a FIFO with no
    reader is refused at once instead of hanging the server before it answers anything."""
    stream = _open_log(log_file) if log_file else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def _open_log(path: str) -> TextIO:
    flags = (
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO nobody reads (O_NONBLOCK refuses it at once)
            raise OSError(errno.ENXIO, "not a regular file", path) from error
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
    except BaseException:
        os.close(fd)
        raise


def progress_after() -> float:
    """Seconds long work runs before it shows progress (the server's ``$/progress``, the CLI's
    line on a terminal): ``$DSH_PROGRESS_AFTER`` when it is a number from 0 up, else half a
    second, so quick work does not flash a progress display."""
    raw = os.environ.get(PROGRESS_ENV, "")
    try:
        value = float(raw) if raw.strip() else PROGRESS_AFTER_DEFAULT
    except ValueError:
        return PROGRESS_AFTER_DEFAULT
    return value if 0 <= value < float("inf") else PROGRESS_AFTER_DEFAULT
