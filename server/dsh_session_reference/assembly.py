"""The one assembly of store, resolver and target, for the CLI and the language server alike.

Both front ends used to build these themselves, differently: this module is where the sessions
root is resolved, where ``$DSH_SESSION_ID`` is read, which store a front end gets over the root,
and how a :class:`.config.ResolverConfig` becomes a resolver. A front end says what it is (a
one-shot CLI run or a long-lived server) and gets the rest.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Mapping
from typing import Final

from .config import ResolverConfig
from .dsh_profile import (
    DEFAULT_PROFILE,
    PATCH_FILENAME,
    ProfileBudgets,
    ProfileLayer,
    budgets_from_layers,
    profile_name_problem,
)
from .jsjson import FileTooLarge, NotRegularFile, read_untrusted
from .model import LiveSource, SessionSource
from .resolver import SessionReferenceResolver
from .store.layout import dsh_home, resolve_root, root_origin, root_problem

__all__ = [
    "ROOT_NOT_FOUND",
    "dsh_profile_budgets",
    "lead_own_process_session",
    "make_resolver",
    "open_live",
    "open_source",
    "root_failure",
    "root_origin",
    "root_problem",
    "sessions_root",
    "start_over",
    "start_spare_worker",
    "target_session",
    "zstd_missing",
]
"""``root_problem`` and ``root_origin`` (:mod:`.store.layout`) are the front ends' words for a root
that is missing or no folder, given here so neither front end reaches into the store."""

ROOT_NOT_FOUND = "SESSIONS_ROOT_NOT_FOUND"
"""The code both front ends give a root that is missing or no folder (upstream has none: it lists
such a root as empty, or fails its listing)."""


def root_failure(root: str, origin: str) -> str | None:
    """What is wrong with ``root`` (from ``origin``, :func:`root_origin`'s words), as both front ends
    say it, or ``None`` for a root that is a directory."""
    problem = root_problem(root)
    return None if problem is None else f'sessions root "{root}" ({origin}) {problem}'


TARGET_ENV = "DSH_SESSION_ID"
"""dsh sets it in the sessions it runs: the session a message is written for, excluded as self."""


PROFILE_FILE_BYTES: Final = 64 << 10
"""The largest profile patch file read (dsh's own bundle layers are under 20 KB; at this size the
strict reader's worst input takes well under a second)."""


def _profile_layer(path: str, label: str) -> ProfileLayer:
    """One patch file, read as untrusted input: a regular file (a symlink to one is followed, as
    dsh follows it), opened without blocking (a FIFO cannot hang the server), at most
    :data:`PROFILE_FILE_BYTES`, strict UTF-8."""
    try:
        data = read_untrusted(path, PROFILE_FILE_BYTES)
    except FileNotFoundError:
        return ProfileLayer(label, None)
    except NotRegularFile:
        return ProfileLayer(label, None, "is not a regular file")
    except FileTooLarge:
        return ProfileLayer(label, None, f"is larger than {PROFILE_FILE_BYTES >> 10} KiB")
    except OSError as error:
        return ProfileLayer(label, None, f"cannot be read ({os.strerror(error.errno or errno.EIO)})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return ProfileLayer(label, None, f"is not UTF-8 (byte {error.start})")
    return ProfileLayer(label, text.removeprefix("\ufeff"))


def dsh_profile_budgets(profile: str | None = None) -> ProfileBudgets:
    """The budgets dsh's ``profile`` (``None`` or empty: ``web``) gives its session-reference plugin,
    from the profile's own patch layer and the home layer, in dsh's order (see :mod:`.dsh_profile`).
    Blocking (two small reads): a server calls it in a worker thread."""
    name = profile or DEFAULT_PROFILE
    problem = profile_name_problem(name)
    if problem is not None:
        return ProfileBudgets(warnings=(f"{problem}; dsh's defaults are used",))
    home = dsh_home()
    profile_file = os.path.join(home, "profiles", name, PATCH_FILENAME)
    home_file = os.path.join(home, PATCH_FILENAME)
    layers = [_profile_layer(profile_file, profile_file), _profile_layer(home_file, home_file)]
    return budgets_from_layers(name, layers)


def sessions_root(*choices: str | None) -> str:
    """The first choice given (a setting, then a command-line option), else dsh's default root."""
    return resolve_root(next((choice for choice in choices if choice), None))


def target_session(explicit: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The target given (``--target``, ``targetSessionId``), else ``$DSH_SESSION_ID``, else none
    (nothing is excluded as self). An empty ``explicit`` counts as not given."""
    if explicit:
        return explicit
    return (os.environ if environ is None else environ).get(TARGET_ENV) or None


def open_live(
    root: str, *, index_dir: str | os.PathLike[str] | None = None, held: bool = False
) -> LiveSource:
    """The store the language server reads ``root`` through: the catalog with its background
    thread, worker process and write-behind index, so no request waits on a file. Its background
    work waits at first for a request to be answered, or with ``held`` for :func:`start_over`; at
    most :data:`.store.scheduler.START_GRACE`."""
    from .store.index.store import APART_READ_BYTES, IndexedSessionStore
    from .store.scheduler import Scheduler

    cores = os.cpu_count() or 1
    store = IndexedSessionStore(
        root, index_dir=index_dir, workers=cores, apart_bytes=APART_READ_BYTES, autoflush=False
    )
    return store.start_catalog(scheduler=Scheduler(held=held))


def start_over(store: LiveSource) -> None:
    """The language server's start is over (its first completion went out): ``store``'s background
    work (:func:`open_live` ``held``) may run. The requests it answered before did not end its
    wait: the listing read ahead at ``initialize`` and the prompt's diagnostics and links come
    first, while the editor is still starting on the same cores, where the background's worker
    process and scans took about half a second of CPU before the first ``@`` was answered."""
    catalog = getattr(store, "catalog", None)
    if catalog is not None:
        catalog.scheduler.start_over()


def open_source(
    root: str,
    *,
    index: bool = True,
    body_search: bool = False,
    index_dir: str | os.PathLike[str] | None = None,
    every_title: bool = False,
) -> SessionSource:
    """The store the CLI reads ``root`` through (the server's is :func:`open_live`).

    Every answer is synchronous: the index fills on every core and huge logs are replayed in
    processes of their own when a core is spare; the catalog is used only for body search (it
    indexes message text before searching). ``index=False`` (``--no-index``) reads every log
    afresh. ``every_title``: the caller will read every session's title (``candidates`` with a
    query), so over a cold index the worker processes are started now, while the root is listed.
    """
    # The stores are imported where chosen: a CLI run pays only for the one it reads with (the
    # catalog and body search add about 20 ms of imports to every fresh process).
    if not index:
        from .store.jsonl_store import JsonlSessionStore

        return JsonlSessionStore(root)
    from .store.index.store import APART_READ_BYTES, IndexedSessionStore

    cores = os.cpu_count() or 1
    store = IndexedSessionStore(
        root, index_dir=index_dir, workers=cores, apart_bytes=APART_READ_BYTES if cores > 1 else None
    )
    if every_title:
        store.start_title_workers()
    return store.start_catalog(background=False) if body_search else store


def make_resolver(
    store: SessionSource, config: ResolverConfig, *, body_search: bool = False
) -> SessionReferenceResolver:
    """The resolver over ``store`` with ``config`` as it is (validated once, where it was made),
    passed whole rather than unpacked into upstream's options."""
    resolver = SessionReferenceResolver(store, body_search=body_search)
    resolver.config = config
    return resolver


def zstd_missing() -> str | None:
    """Why no Zstandard codec can be imported, else ``None``: writing ``.jsonl.zstd`` logs needs one
    (it is imported lazily, so plain logs work without it)."""
    from .store.logbase import LogError, zstd_codec

    try:
        zstd_codec()
    except LogError as error:
        return str(error.__cause__ or error)
    return None


def lead_own_process_session() -> None:
    """Make the language server the leader of a process session of its own (``setsid``), on Linux,
    when an editor started it over pipes: as Neovim starts every language server by default
    (``detached``, but on Windows), and VS Code does not.

    Where the kernel shares the CPU between process sessions before their threads (autogroups:
    ``kernel.sched_autogroup_enabled`` on, as in most distributions' kernels, and the editor in
    the root CPU cgroup), a server left in the editor's session is one thread among the editor's
    many, and a busy editor starves its start (``bench/startup.py --busy``, docs/benchmarks.md).
    In a session of its own it gets a session's share while it works, and together with its
    worker processes (started after this, so in the same session) no more. The server reads the
    editor's requests from its stdin and exits when that closes: it needs no terminal, and no
    signal sent to the editor's process group reaches it. Left alone: a server whose
    stdin is a terminal (run by hand, where Ctrl+C must still reach it), and one that leads a
    process group already (a terminal's job, an editor that started it detached), for which
    ``setsid`` fails. A session leader takes a terminal it opens as its controlling one, unless
    opened with ``O_NOCTTY``: so are the paths a client, a root or the cache folder names
    (``jsjson.read_untrusted``, ``store.logbase``, ``store.cache_files``)."""
    if sys.platform == "linux" and not os.isatty(0):
        with contextlib.suppress(OSError):
            os.setsid()


def start_spare_worker() -> None:
    """Start, where a core is spare, the worker process a cold index's first walk will take: the
    language server calls it before its LSP stack's imports (0.7 s), so the worker is ready by then.

    Only while no index has been kept at all (the first start on this machine). Every later start
    answers its first ``@`` from the index it finds and takes no spare: one started anyway spent a
    quarter of a second of CPU importing its code beside the server's own start, on two cores
    shared with the editor (about 15% of the start at 3,000 sessions, ``bench/startup.py``). A
    server over a root not indexed yet starts its workers when its first walk needs them."""
    if (os.cpu_count() or 1) > 1 and not _index_kept():
        from .store.workers import start_spare

        start_spare()


def _index_kept() -> bool:
    """Whether the cache folder holds any root's index (its names are only listed, never opened)."""
    from .store.index.database import default_index_dir

    try:
        with os.scandir(default_index_dir()) as entries:
            return any(entry.name.endswith(".sqlite3") for entry in entries)
    except OSError:
        return False
