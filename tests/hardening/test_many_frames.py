"""A zstd log of millions of empty frames costs time per frame, never memory per frame.

Nine bytes make a valid empty zstd frame, so a 72 MB log can hold eight million.
The reader kept two offsets per frame (and decoded each frame in a call of its
own): 285 MiB and 92 s to read one title. It now validates the structure in one
pass that keeps nothing per frame, then decodes consecutive small frames
together, so memory is the same for 130,000 frames as for 280,000.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.index.store import APART_READ_BYTES, ZSTD_EXPANSION
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import header, lines, one_turn, put, title

from .audit import run_audited


def empty_frames_log(root: Path, sid: str, empty_frames: int) -> int:
    """A healthy titled session with ``empty_frames`` empty frames before its last line."""
    compressor = zstandard.ZstdCompressor()
    parts = lines(header(sid), *one_turn(0, "hi", "ok"), title(6, f"Title {sid}")).split(b"\n")[:-1]
    frames = [compressor.compress(part + b"\n") for part in parts]
    empty = compressor.compress(b"")
    data = b"".join(frames[:-1]) + empty * empty_frames + frames[-1]
    put(root, sid, data, compression="zstd")
    return len(data)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("frames") / "sessions"
    # Past twice every buffer of the reader (1 MiB reads), so both logs fill each buffer to the
    # brim and only the frame count differs between them. The CLI reads both in the measured
    # process: with --no-index nothing is read apart, whatever the size.
    assert empty_frames_log(root, "few", 240_000) > 2 << 20
    assert empty_frames_log(root, "many", 600_000) > APART_READ_BYTES / ZSTD_EXPANSION
    return root


def test_a_log_of_empty_frames_reads_exactly(root: Path) -> None:
    store = JsonlSessionStore(root)
    assert {record.id for record in store.list_sessions()} == {"few", "many"}
    titles = store.read_titles(store.list_sessions())
    assert sorted(observation.title for observation in titles) == ["Title few", "Title many"]
    surface = store.read_surface("many")
    assert surface.captured_through_seq == 6


def test_memory_does_not_grow_with_the_frame_count(root: Path, tmp_path: Path) -> None:
    peaks = {}
    for sid in ("few", "many"):
        prompt = tmp_path / f"{sid}.md"
        prompt.write_text(format_session_reference_mention(sid))
        run = run_audited(
            ["--sessions", str(root), "--no-index", "--json", "prepare", str(prompt)], tmp_path / "a.log"
        )
        assert run.returncode == 0, run.stderr
        assert (
            json.loads(run.stdout)["additionalContext"]["source"]["references"][0]["capturedThroughSeq"] == 6
        )
        peaks[sid] = run.audit.peak_kb()
    # 360,000 more frames held at 16 bytes each would be 5.5 MiB more (the old reader: 9.6 MiB).
    assert peaks["many"] - peaks["few"] < 1024, peaks
