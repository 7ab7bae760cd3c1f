"""Where dsh keeps a session on disk, and the rules that keep a read inside the root.

``<root>/<projectDir>/<encodeSegment(id)>/session.jsonl[.zstd]`` exactly as
upstream's ``dsh-session-persistence-jsonl`` lays it out. A session id comes
from text anyone can type (a URI in a document), so it only ever reaches the
filesystem through :func:`encode_segment`, whose output is one safe path
segment (never ``.``, ``..``, a separator or NUL); anything the store opens is
additionally checked to resolve inside the root, so a symlink cannot lead a
read out of it.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable
from typing import Final, Literal

Compression = Literal["zstd", "none"]

LOG_NAMES: Final[dict[Compression, str]] = {"zstd": "session.jsonl.zstd", "none": "session.jsonl"}
"""The artifact file name per encoding (upstream's ``session${logSuffix(compression)}``)."""
ZSTD_NAME: Final = os.sep + LOG_NAMES["zstd"]
PLAIN_NAME: Final = os.sep + LOG_NAMES["none"]
"""A session directory's two logs are ``directory + ZSTD_NAME`` and ``directory + PLAIN_NAME``."""

NO_CWD_DIR: Final = "_no-cwd"

_SAFE = re.compile(r"[A-Za-z0-9._-]")
_SAFE_RUN = re.compile(r"[A-Za-z0-9._-]+")
_ESCAPE = re.compile(r"~([0-9A-F]{4})")
_SEGMENT = re.compile(r"(?:~[0-9A-F]{4}|[A-Za-z0-9._-])*")


def _code_units(text: str) -> list[int]:
    """The UTF-16 code units JS iterates with ``charCodeAt`` (lone surrogates kept)."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i] | raw[i + 1] << 8 for i in range(0, len(raw), 2)]


def _escape_unit(unit: int) -> str:
    char = chr(unit)
    if char != "~" and _SAFE.fullmatch(char):
        return char
    return f"~{unit:04X}"


def encode_segment(raw: str) -> str:
    """Upstream's ``encodeSegment``: an injective encoding of any JS string as one safe segment."""
    if raw == "":
        raise ValueError("cannot encode an empty path segment")
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    if _SAFE_RUN.fullmatch(raw):
        return raw  # the common id (a UUID): every character stands for itself
    return "".join(_escape_unit(unit) for unit in _code_units(raw))


def decode_segment(segment: str) -> str | None:
    """The id whose :func:`encode_segment` is ``segment``, or ``None`` if no id encodes to it.

    Used to name the session a damaged artifact belongs to when its header
    cannot say so itself.
    """
    if _SEGMENT.fullmatch(segment) is None:
        return None
    # Each escape becomes its UTF-16 code unit; a surrogate pair's two halves then make one character.
    units = _ESCAPE.sub(lambda match: chr(int(match[1], 16)), segment)
    decoded = units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    try:
        canonical = encode_segment(decoded)
    except ValueError:
        return None
    return decoded if canonical == segment else None


def project_key(cwd: str) -> str:
    """Upstream's ``projectKey``: a readable, lossy, length-bounded directory name for a cwd.

    A listing checks every header's cwd against its project directory, and a
    root has few distinct cwds, so ordinary-length ones are remembered.
    """
    return _project_key_cached(cwd) if len(cwd) <= 1024 else _project_key(cwd)


def _project_key(cwd: str) -> str:
    """Each run of separators one ``-``, every other code unit itself or escaped, leading ``-`` cut,
    the first 251 characters kept. Each character makes at least one, so only the first 251
    after the runs are joined and the leading ``-`` cut are looked at one by one: a cwd of 8 MB
    made 8 million strings here (a 300 MB listing, 2 s a log)."""
    if cwd == "":
        raise ValueError("cannot encode an empty project path")
    head = _SEPARATOR_RUN.sub("-", cwd).lstrip("-")[:SLUG_CHARS]  # an escape never starts with -
    slug = "".join(_escape_unit(unit) for unit in _code_units(head)) or "root"
    return f"--{slug[:SLUG_CHARS]}--"


_SEPARATOR_RUN: Final = re.compile(r"[/\\:]+")
SLUG_CHARS: Final = 251


_project_key_cached = functools.lru_cache(maxsize=4096)(_project_key)


def log_path(root: str, cwd: str | None, session_id: str, compression: Compression) -> str:
    """Upstream's ``logPath``: the one place a session's log may live."""
    project_dir = NO_CWD_DIR if cwd is None else project_key(cwd)  # upstream's ``projectDir``
    return os.path.join(root, project_dir, encode_segment(session_id), LOG_NAMES[compression])


def expand_home(path: str) -> str:
    """``~``, ``~/x`` and ``~\\x`` against the user's home, as dsh expands ``DSH_HOME``."""
    if path == "~":
        return os.path.expanduser("~")
    if path.startswith(("~/", "~\\")):
        return os.path.join(os.path.expanduser("~"), path[2:])
    return path


def dsh_home(environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """``$DSH_HOME``, or ``~/.dsh`` when ``DSH_HOME`` is unset or blank (dsh's ``resolveDshHome``)."""
    home = (os.environ if environ is None else environ).get("DSH_HOME", "")
    base = expand_home(home) if home.strip() else os.path.join(os.path.expanduser("~"), ".dsh")
    return os.path.abspath(base)


def default_root(environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """``$DSH_HOME/sessions``, or ``~/.dsh/sessions`` when ``DSH_HOME`` is unset or blank."""
    return os.path.join(dsh_home(environ), "sessions")


def resolve_root(root: str | os.PathLike[str] | None) -> str:
    """The absolute, normalised root (``path.resolve`` in upstream); ``None`` means the default."""
    if root is None:
        return default_root()
    return os.path.abspath(expand_home(os.fspath(root)))


def root_origin(given: str | None, given_as: str) -> str:
    """Where a sessions root came from, in words for a message: ``given_as`` (a flag or setting)
    when one was given, else ``$DSH_HOME`` or the default, as :func:`default_root` chooses."""
    if given:
        return given_as
    return "from $DSH_HOME" if os.environ.get("DSH_HOME", "").strip() else "dsh's default"


def root_problem(root: str) -> str | None:
    """Why ``root`` cannot be a sessions root (it does not exist, is no directory, cannot be
    read), or ``None``. Upstream lists a missing root as empty; people need to hear that the path
    they gave is wrong, so the CLI and the server say it (nothing is created or opened here)."""
    try:
        info = os.stat(root)
    except FileNotFoundError:
        return "does not exist"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    return None


def is_real(path: str, kind: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (not a link's target) is of ``kind`` (``stat.S_ISDIR``, ...)."""
    try:
        return bool(kind(os.lstat(path).st_mode))
    except OSError:
        return False


def is_within(root_real: str, path_real: str) -> bool:
    """Whether a fully resolved path lies inside a fully resolved root."""
    if path_real == root_real:
        return False
    prefix = root_real if root_real.endswith(os.sep) else root_real + os.sep
    return path_real.startswith(prefix)


_LOG_FILE_NAMES: Final = frozenset(LOG_NAMES.values())
_NOT_NAMES: Final = frozenset({"", ".", ".."})


def is_walk_relative(relative: str) -> bool:
    """Whether ``relative`` is a log path a walk makes, below the root: ``<project>/<session>/<log
    name>``, each name one a file system could have given (text from the index folder, which is
    not trusted, is checked with this before it names a path)."""
    parts = relative.split(os.sep)
    if not (
        len(parts) == 3
        and parts[2] in _LOG_FILE_NAMES
        and parts[0] not in _NOT_NAMES
        and parts[1] not in _NOT_NAMES
        and "\0" not in relative
    ):
        return False
    try:
        os.fsencode(relative)  # no stray surrogate
    except UnicodeError:
        return False
    return True
