"""A line too big to hold: discovery (titles, message text) skips it, ``prepare`` still fails on it.

The reader's cap is lowered to 64 KiB here so a 100 KiB line stands for the 200 MB one of the
corrupt-store corpus (which runs the real size through every face)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dsh_session_reference.model import StoreError
from dsh_session_reference.store import JsonlSessionStore, logfile
from dsh_session_reference.store.index.bodies import message_text
from store.logbuild import as_zstd, event, header, lines, one_turn, put, title, turn_end, turn_start, user
from zstd_backends import by_compression

CAP = 64 * 1024
BIG = "x" * (100 * 1024)


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfile, "MAX_LINE_BYTES", CAP)


def _log(sid: str, big: dict[str, object]) -> bytes:
    """A turn, then a turn whose line 8 is ``big``, then a title after it."""
    return lines(header(sid), *one_turn(0, "q", "a"), turn_start(6), big, turn_end(8), title(9, "Past it"))


@by_compression
def test_a_title_past_an_oversized_message_is_read_and_the_skip_logged(
    tmp_path: Path, compression: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = _log("big", user(7, BIG))
    put(tmp_path, "big", as_zstd(data) if compression == "zstd" else data, compression)  # type: ignore[arg-type]
    store = JsonlSessionStore(tmp_path)
    [record] = store.list_sessions()
    with caplog.at_level(logging.WARNING):
        [observation] = store.read_titles([record])
    assert (observation.title, observation.error) == ("Past it", None)
    skipped = f"skipped: session log line 8 is larger than {CAP} bytes"
    assert any(skipped in message and str(record.location) in message for message in caplog.messages)
    with pytest.raises(StoreError) as caught:
        store.read_surface("big")  # prepare reads the session whole: the line still fails it
    assert caught.value.message == (
        f'failed to inspect session "big": session log line 8 is larger than {CAP} bytes, '
        "the most this reader holds in memory"
    )


@pytest.mark.parametrize(
    "big",
    [
        event("session/title", 7, {"title": BIG, "messageSeqs": [], "source": {"kind": "user"}}),
        user(6, BIG),  # out of sequence: the envelope does not continue the log
        {"seq": 7, "type": "user/message", "time": 1, "data": BIG},  # not upstream's spelling
    ],
    ids=["a-title", "seq-gap", "other-envelope"],
)
def test_only_an_in_sequence_content_event_is_skipped(tmp_path: Path, big: dict[str, object]) -> None:
    put(tmp_path, "big", _log("big", big))
    store = JsonlSessionStore(tmp_path)
    [observation] = store.read_titles(store.list_sessions())
    assert observation.title is None
    assert observation.error is not None and f"line 8 is larger than {CAP} bytes" in observation.error


def test_message_text_for_body_search_keeps_the_rest_of_the_log(tmp_path: Path) -> None:
    data = lines(header("big"), turn_start(0), user(1, BIG), turn_end(2), *one_turn(3, "later", "reply"))
    path = put(tmp_path, "big", data)
    text = message_text(path, str(tmp_path.resolve()))
    assert text.split("\n") == ["later", "reply"]


def test_a_failure_after_a_skipped_line_is_the_size_error_not_a_corrupt_log(tmp_path: Path) -> None:
    """A skipped event is taken as valid without being read: a later replace of it (a compaction of
    the huge message) cannot be checked, so the read fails as it did before skipping, by size."""
    replace = event(
        "user/message",
        3,
        user(3, "compacted")["data"],
        sourceEventSeqs=[1],
        surfaceOp={"op": "replace", "start": 1, "end": 1},
    )
    put(
        tmp_path,
        "big",
        lines(header("big"), turn_start(0), user(1, BIG), turn_end(2), replace, title(4, "T")),
    )
    store = JsonlSessionStore(tmp_path)
    [observation] = store.read_titles(store.list_sessions())
    assert observation.title is None
    assert observation.error == (
        f'failed to inspect session "big": session log line 2 is larger than {CAP} bytes, '
        "the most this reader holds in memory"
    )


@pytest.mark.parametrize(
    "head",
    [
        b'{"type":"user/message","seq":07,"time":1,"data":"',
        b'{"type":"user/message","seq":7,"time":01,"data":"',
    ],
    ids=["seq", "time"],
)
def test_an_envelope_json_would_refuse_is_never_skipped(tmp_path: Path, head: bytes) -> None:
    """A leading zero is not JSON: upstream cannot parse the line, so it is not an event to skip."""
    data = lines(header("big"), *one_turn(0, "q", "a"), turn_start(6))
    data += head + BIG.encode() + b'"}\n' + lines(turn_end(8), title(9, "Past it"))
    put(tmp_path, "big", data)
    store = JsonlSessionStore(tmp_path)
    [observation] = store.read_titles(store.list_sessions())
    assert observation.title is None
    assert observation.error is not None and f"line 8 is larger than {CAP} bytes" in observation.error
