"""The store over a whole root: listing, titles, isolation of bad artifacts, symlinks, safety."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pytest

from dsh_session_reference.cancellation import AbortSignal, Cancelled
from dsh_session_reference.model import StoreError
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.layout import log_path
from dsh_session_reference.store.logbase import LogError, open_artifact
from zstd_backends import by_compression, zstd

from .logbuild import T0, as_zstd, header, lines, one_turn, put, snapshot_tree, title

TURN = one_turn()


def plain(sid: str, **fields: object) -> bytes:
    return lines(header(sid, **fields), *TURN)


def _error(call: object) -> StoreError:
    with pytest.raises(StoreError) as raised:
        call()  # type: ignore[operator]
    return raised.value


# Upstream's listSessions order for these ids, all created in the same millisecond.
TIED_IDS_IN_UPSTREAM_ORDER = [
    "_", "-", ".", "..", "~tilde", "😀", "1", "a", "a\x00", "A", "a_b", "a-b", "ab", "é", "e\u0301",
    "été", "sess-b", "sess-C", 'uni/引号"/\\x', "with space", "x-ä", "x-Z", "\ud800",
]  # fmt: skip


@by_compression
def test_listing_order_matches_upstream(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "sessions"
    cwds = ["/w", None, "/C:\\Users\\x", "/home/ü/proj", "/"]
    for n, sid in enumerate(TIED_IDS_IN_UPSTREAM_ORDER):
        cwd = cwds[n % 5]
        data = lines(header(sid, **({"cwd": cwd} if cwd else {"cwd": None})), *TURN, title(6, f"T{n}"))
        data = data.replace(b'"cwd":null,', b"")
        put(root, sid, as_zstd(data) if compression == "zstd" else data, compression, cwd=cwd)
    newer = lines(header("newer", createdAt=T0 + 5))
    put(root, "newer", as_zstd(newer) if compression == "zstd" else newer, compression)
    store = JsonlSessionStore(root)
    records = store.list_sessions()
    assert [r.id for r in records] == ["newer", *TIED_IDS_IN_UPSTREAM_ORDER]
    by_id = {r.id: r for r in records}
    assert by_id["a"].cwd == "/C:\\Users\\x" and by_id["-"].cwd is None and by_id[".."].cwd == "/home/ü/proj"
    assert by_id["newer"].created_at == T0 + 5
    titles = store.read_titles(records)
    assert [t.title for t in titles] == [
        None,
        *(f"T{TIED_IDS_IN_UPSTREAM_ORDER.index(i)}" for i in TIED_IDS_IN_UPSTREAM_ORDER),
    ]
    snapshot = store.read_surface('uni/引号"/\\x')
    assert snapshot.session.id == 'uni/引号"/\\x' and snapshot.captured_through_seq == 6


def test_the_sessions_read_figure_never_goes_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress and the popup's "Listing" row say how many sessions are read: a walk after one that
    ended (a revalidation) counts from that one's total, not from zero ("1,316 read", then "1,038")."""
    from dsh_session_reference.store import listing

    root = tmp_path / "sessions"
    logs = [put(root, f"s{n}", plain(f"s{n}")) for n in range(4)]
    store = JsonlSessionStore(root)
    seen: list[int] = []
    inspect = listing.inspect_directory

    def counting(*args: object) -> None:
        seen.append(store.walked_sessions)
        inspect(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(listing, "inspect_directory", counting)
    assert len(store.list_sessions()) == 4
    assert seen == [0, 1, 2, 3] and store.walked_sessions == 4
    seen.clear()
    Path(logs[3]).parent.rename(tmp_path / "gone")  # the next walk finds fewer
    assert len(store.list_sessions()) == 3
    assert seen == [4, 4, 4] and store.walked_sessions == 3  # the new total once it ended


def test_missing_root_lists_nothing(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path / "absent")
    assert store.list_sessions() == []
    assert _error(lambda: store.read_surface("x")).message == 'session "x" not found'
    assert not (tmp_path / "absent").exists()


def test_root_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    store = JsonlSessionStore(tmp_path / "file")
    for call in (store.list_sessions, lambda: store.read_surface("x")):
        error = _error(call)
        assert (
            error.message
            == f"session persistence listing failed: ENOTDIR: not a directory, scandir '{tmp_path / 'file'}'"
        )
        assert error.code == "SESSION_QUERY_PERSISTENCE_FAILED"


def test_empty_id_and_unknown_ids_are_not_found(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "s", plain("s"), "none")
    store = JsonlSessionStore(root)
    for sid in ("", "S", "s ", "nope"):
        error = _error(lambda sid=sid: store.read_surface(sid))
        assert (error.message, error.code) == (
            f'session "{sid}" not found',
            "SESSION_QUERY_SESSION_NOT_FOUND",
        )


@pytest.mark.parametrize(
    "hostile",
    ["..", ".", "../outside", "../../etc/passwd", "/etc/passwd", "\\..\\x", "a/../../b", "x\x00y", "~"],
)
def test_path_traversal_ids_never_leave_the_root(tmp_path: Path, hostile: str) -> None:
    """A log planted where a naive join would look is never read; the id is simply not found."""
    root = tmp_path / "root" / "sessions"
    root.mkdir(parents=True)
    for place in (tmp_path / "outside", tmp_path / "root", root / "--w--"):
        place.mkdir(parents=True, exist_ok=True)
        (place / "session.jsonl").write_bytes(plain(hostile))
    store = JsonlSessionStore(root)
    assert _error(lambda: store.read_surface(hostile)).message == f'session "{hostile}" not found'
    put(root, hostile, plain(hostile), "none")
    assert store.read_surface(hostile).session.id == hostile
    assert [r.id for r in store.list_sessions()] == [hostile]


def test_duplicate_ids_are_isolated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "sessions"
    put(root, "dup", plain("dup", cwd="/p1"), "none", cwd="/p1")
    put(root, "dup", plain("dup", cwd="/p2"), "none", cwd="/p2")
    put(root, "ok", plain("ok"), "none")
    store = JsonlSessionStore(root)
    with caplog.at_level(logging.WARNING, logger="dsh_session_reference.store"):
        assert [r.id for r in store.list_sessions()] == ["ok"]
    message = 'duplicate JSONL session id "dup" appears in multiple project directories'
    assert sum(message in r.getMessage() for r in caplog.records) == 2  # both copies named
    assert all(r.name == "dsh_session_reference.store" for r in caplog.records)
    assert (
        _error(lambda: store.read_surface("dup")).message == f"session persistence listing failed: {message}"
    )
    assert store.read_surface("ok").captured_through_seq == 5


def test_skipped_artifacts_are_logged_once_per_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "sessions"
    put(root, "mm", plain("other-id"), "none")
    store = JsonlSessionStore(root)
    with caplog.at_level(logging.WARNING, logger="dsh_session_reference.store"):
        store.list_sessions()
        store.list_sessions()
    assert len(caplog.records) == 1


@by_compression
def test_root_wide_failures_only_affect_their_artifact(tmp_path: Path, compression: str) -> None:
    """Each of these makes upstream's listing throw for the whole root (same messages)."""
    root = tmp_path / "sessions"

    def place(sid: str, data: bytes, cwd: str | None = "/w") -> str:
        return put(root, sid, as_zstd(data) if compression == "zstd" else data, compression, cwd=cwd)

    good = place("good", plain("good"))
    mismatch = place("mm", plain("other-id"))
    retired = place("ret", plain("ret", sandboxMode="x"))
    place("empty-id", plain(""))
    flat = root / "--w--" / ("flat.jsonl" if compression == "none" else "flat.jsonl.zstd")
    flat.write_bytes(b"")
    os.makedirs(log_path(str(root), "/w", "dir-log", compression))
    store = JsonlSessionStore(root)
    assert [r.id for r in store.list_sessions()] == ["good"]
    expected = {
        "mm": f'corrupt session log "{mismatch}": header id "other-id" and cwd identify '
        f'"{log_path(str(root), "/w", "other-id", compression)}"',
        "ret": "session header uses retired policy baseline fields",
        "empty-id": f'corrupt session log "{os.path.dirname(good)[:-4]}empty-id/{os.path.basename(good)}": '
        "header id cannot name a storage path",
        "flat": f'session artifact "{flat}" uses the unsupported flat-file layout; use a separate root or move '
        "it into a project/session directory before loading",
        "dir-log": "EISDIR: illegal operation on a directory, read",
    }
    for sid, message in expected.items():
        error = _error(lambda sid=sid: store.read_surface(sid))
        assert error.message == f"session persistence listing failed: {message}", sid
    assert store.read_surface("good").captured_through_seq == 5
    assert retired.endswith("session.jsonl" if compression == "none" else "session.jsonl.zstd")


@zstd
def test_a_directory_holding_both_encodings_is_isolated(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "both", plain("both"), "none")
    put(root, "both", as_zstd(plain("both")), "zstd")
    put(root, "good", plain("good"), "none")
    store = JsonlSessionStore(root)
    assert [r.id for r in store.list_sessions()] == ["good"]
    assert "uses .jsonl, but this backend is configured" in _error(lambda: store.read_surface("both")).message


@zstd
def test_a_root_mixing_encodings_reads_each_log_in_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """dsh keeps one encoding per root (upstream refuses a mixed root); each log reads as upstream reads it."""
    root = tmp_path / "sessions"
    put(root, "plain", plain("plain", createdAt=T0 + 1), "none")
    put(root, "zstd", as_zstd(plain("zstd")), "zstd")
    store = JsonlSessionStore(root)
    with caplog.at_level(logging.WARNING, logger="dsh_session_reference.store"):
        assert [r.id for r in store.list_sessions()] == ["plain", "zstd"]
    assert "holds both .jsonl and .jsonl.zstd logs" in caplog.text
    assert (
        store.read_surface("plain").captured_through_seq
        == store.read_surface("zstd").captured_through_seq
        == 5
    )


def test_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    outside = tmp_path / "outside"
    put(root, "real", plain("real"), "none")
    # A symlinked session.jsonl whose target stays inside the root works, as upstream.
    (root / "store-area").mkdir()
    (root / "store-area" / "linked.txt").write_bytes(plain("linked"))
    (root / "--w--" / "linked").mkdir()
    os.symlink("../../store-area/linked.txt", root / "--w--" / "linked" / "session.jsonl")
    # A dangling one is skipped.
    (root / "--w--" / "dangling").mkdir()
    os.symlink("../../nowhere", root / "--w--" / "dangling" / "session.jsonl")
    # Symlinked session and project directories are invisible, as upstream.
    (outside / "sd").mkdir(parents=True)
    (outside / "sd" / "session.jsonl").write_bytes(plain("symdir"))
    os.symlink(outside / "sd", root / "--w--" / "symdir")
    (outside / "proj" / "symproj").mkdir(parents=True)
    (outside / "proj" / "symproj" / "session.jsonl").write_bytes(plain("symproj", cwd="/q"))
    os.symlink(outside / "proj", root / "--q--")
    # A symlinked log pointing outside the root is never followed out (upstream would read it).
    (outside / "escape.jsonl").write_bytes(plain("escape"))
    (root / "--w--" / "escape").mkdir()
    os.symlink(outside / "escape.jsonl", root / "--w--" / "escape" / "session.jsonl")

    store = JsonlSessionStore(root)
    assert [r.id for r in store.list_sessions()] == ["linked", "real"]
    assert store.read_surface("linked").captured_through_seq == 5
    for sid in ("dangling", "symdir", "symproj"):
        assert _error(lambda sid=sid: store.read_surface(sid)).message == f'session "{sid}" not found'
    assert (
        "resolves outside the sessions root and is not followed"
        in _error(lambda: store.read_surface("escape")).message
    )


def test_a_symlinked_root_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    put(real, "s", plain("s"), "none")
    os.symlink(real, tmp_path / "link")
    assert JsonlSessionStore(tmp_path / "link").read_surface("s").captured_through_seq == 5


@zstd
def test_reading_never_changes_the_root(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "ok", plain("ok"), "none")
    put(root, "torn", plain("torn") + b'{"type":"turn/start"', "none")
    put(root, "open", lines(header("open"), *TURN[:3]), "none")
    put(root, "z", as_zstd(lines(header("z"), *TURN[:3])) + b"\x28\xb5", "zstd", cwd=None)
    put(root, "bad", lines(header("bad"), *TURN[:2], "garbage", *TURN[2:]), "none")
    put(root, "dup", plain("dup", cwd="/a"), "none", cwd="/a")
    put(root, "dup", plain("dup", cwd="/b"), "none", cwd="/b")
    os.utime(root / "--w--" / "ok" / "session.jsonl", ns=(1, 2))
    before = snapshot_tree(root)
    store = JsonlSessionStore(root)
    records = store.list_sessions()
    store.read_titles(records)
    for sid in ("ok", "torn", "open", "z", "bad", "dup", "missing"):
        with contextlib.suppress(StoreError):
            store.read_surface(sid)
    assert snapshot_tree(root) == before


def test_read_titles_keeps_order_and_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "a", lines(header("a"), *TURN, title(6, "A1"), title(7, "A2")), "none")
    put(root, "b", lines(header("b"), *TURN[:2], "garbage", *TURN[2:]), "none")
    store = JsonlSessionStore(root)
    records = {r.id: r for r in store.list_sessions()}
    observations = store.read_titles([records["b"], records["a"], records["b"]])
    assert [(o.session_id, o.title) for o in observations] == [("b", None), ("a", "A2"), ("b", None)]
    assert (
        observations[0].error is not None and "unparsable committed event at line 3" in observations[0].error
    )
    assert observations[1].error is None


def test_a_changed_header_conflicts_with_the_listing(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    path = put(root, "s", plain("s"), "none")
    store = JsonlSessionStore(root)
    (record,) = store.list_sessions()
    with open(path, "wb") as handle:
        handle.write(plain("s", createdAt=T0 + 9))
    (observation,) = store.read_titles([record])
    assert observation.error == 'session source headers conflict for session "s"'


def test_stop_event_stops_reads(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "s", plain("s"), "none")
    store = JsonlSessionStore(root)
    stop = AbortSignal()
    stop.abort()
    with pytest.raises(Cancelled):
        store.list_sessions(stop)
    with pytest.raises(Cancelled):
        store.read_surface("s", stop)
    records = store.list_sessions()
    with pytest.raises(Cancelled):
        store.read_titles(records, stop)


def test_a_version_1_header_is_listed_but_unreadable(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    path = put(root, "v1", plain("v1", version=1), "none")
    store = JsonlSessionStore(root)
    (record,) = store.list_sessions()
    assert record.id == "v1" and record.header["version"] == 1
    (observation,) = store.read_titles([record])
    assert observation.title is None and observation.error is not None
    assert _error(lambda: store.read_surface("v1")).message == (
        'failed to inspect session "v1": session "v1" uses log format v1, but this harness reads only v0: '
        f"the log was written by a newer harness — upgrade the harness to open it (raw log: {path})"
    )


@zstd
@pytest.mark.parametrize("indexed", [False, True])
def test_a_root_named_with_a_trailing_slash_or_relatively_lists_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indexed: bool
) -> None:
    """The walk opens each log under the resolved root without resolving it again; that
    must hold however the root was spelled."""
    root = tmp_path / "sessions"
    put(root, "a", plain("a"), "none")
    put(root, "z", as_zstd(plain("z", cwd="/other")), "zstd", cwd="/other")

    def listing(spelled: str) -> list[tuple[str, int]]:
        store = (
            IndexedSessionStore(spelled, index_dir=tmp_path / f"index-{len(spelled)}")
            if indexed
            else JsonlSessionStore(spelled)
        )
        records = store.list_sessions()
        return [(r.id, store.read_surface(r.id).captured_through_seq) for r in records]

    expected = listing(str(root))
    assert sorted(expected) == [("a", 5), ("z", 5)]
    assert listing(str(root) + "/") == expected
    assert listing(str(root) + "//") == expected
    monkeypatch.chdir(tmp_path)
    assert listing("sessions") == expected
    assert listing("./sessions/") == expected


def test_a_log_that_became_a_link_after_the_walk_saw_it_is_resolved_and_checked(tmp_path: Path) -> None:
    """``open_artifact``'s ``resolved`` shortcut never follows a link: a log swapped for one
    between the walk's ``lstat`` and the open takes the checked path."""
    root = tmp_path / "sessions"
    put(root, "inside", plain("inside"), "none")
    inside = Path(put(root, "moved", plain("moved"), "none"))
    (tmp_path / "outside.jsonl").write_bytes(plain("escape"))
    escape = root / "--w--" / "escape" / "session.jsonl"
    escape.parent.mkdir()
    os.symlink(tmp_path / "outside.jsonl", escape)
    swapped = root / "--w--" / "swapped" / "session.jsonl"
    swapped.parent.mkdir()
    os.symlink(inside, swapped)
    root_real = os.path.realpath(root)
    with pytest.raises(LogError, match="resolves outside the sessions root"):
        open_artifact(str(escape), root_real, resolved=str(escape))
    with open_artifact(str(swapped), root_real, resolved=str(swapped)) as handle:
        assert handle.read() == plain("moved")
    # A ``resolved`` outside the root is not trusted either.
    with pytest.raises(LogError, match="resolves outside the sessions root"):
        open_artifact(str(escape), root_real, resolved=str(tmp_path / "outside.jsonl"))


@zstd
def test_zstd_decoding_recovers_after_a_corrupt_frame_in_the_same_thread(tmp_path: Path) -> None:
    """Each thread reuses one decompression context; a frame that fails must not spoil it."""
    root = tmp_path / "sessions"
    good = as_zstd(plain("good"))
    corrupt = bytearray(good)
    corrupt[-6] ^= 0xFF  # inside the last frame's payload or checksum
    put(root, "good", good, "zstd")
    put(root, "bad", bytes(corrupt), "zstd")
    store = JsonlSessionStore(root)
    for _ in range(3):
        assert "corrupt" in _error(lambda: store.read_surface("bad")).message.lower()
        assert store.read_surface("good").captured_through_seq == 5
