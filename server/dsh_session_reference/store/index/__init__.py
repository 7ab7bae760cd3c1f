"""An incremental header and title index: the stateless reader's answers, kept per log.

Listing a dsh root opens every log for its header, and a title read replays a
whole log (upstream's ``readTitleSnapshots`` inspects every log in full, so a
non-empty ``@`` query over 10,000 sessions reads about a gigabyte). Logs are
append-only and rarely change once a session is over, so what a read found is
kept in a SQLite file in the user's cache folder
(``${XDG_CACHE_HOME:-~/.cache}/dsh-session-reference/index/``), keyed by the
log's path and its ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``.
Only logs whose key changed are read again; the answers are exactly those of
the uncached store, because a hit replays the very outcome the uncached code
produced for those bytes:

* a listing entry is the result of the store's own per-directory inspection
  (the artifact's header, or why it is skipped, or nothing);
* a title entry is the store's own title observation (title, none, or the read
  error), valid only for the same record id and header.

An entry is stored only when the log's key is the same after the read as
before it, and it is trusted only when the log had not changed for
:data:`RACY_NS` before it was read (a write in the same timestamp tick could
otherwise hide behind an unchanged key, the "racy git" problem).

A cold index is CPU work, so it is shared with worker processes
(``workers`` > 1): the first walk of a root with many unseen logs has them
read headers from the end of the walk while it reads from the start
(:class:`.walk.HeaderReaders`), and a title read over many megabytes of unseen logs
replays them in parallel. Their results are entries like any other.

The index is a cache, never a source of truth: a file that is not this
index (another application id, schema, or root), fails SQLite's
``quick_check``, or holds a row whose checksum does not match is deleted and
rebuilt. It is never placed inside the sessions root, which stays read-only;
when the cache folder cannot be written the index lives in memory.

One module per part: :mod:`.rows` (a log's row and its entries, the fingerprint idiom
:func:`.rows.stable_read`), :mod:`.database` (the file and the cache folder), :mod:`.table`
(:class:`.table.RowTable`, the rows in memory and their write-behind), :mod:`.walk` (a walk of the
root that answers from rows where it can), :mod:`.store` (:class:`.store.IndexedSessionStore`, the
table as a :class:`~...model.SessionSource`), :mod:`.kept` (the listing one server leaves the next),
:mod:`.verify` (titles of a cold index replayed in worker processes), :mod:`.records` and
:mod:`.tasks` (what worker processes run and send back), :mod:`.title_scan` (the last
``session/title`` line of a log by a byte scan, without decoding its events) and :mod:`.bodies` (the
opt-in body search's message text).
"""
