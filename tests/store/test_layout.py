"""On-disk layout: upstream's path encoding, the default root, and containment."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_reference.store.layout import (
    decode_segment,
    default_root,
    encode_segment,
    is_within,
    log_path,
    project_key,
    resolve_root,
)


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        ("sess-1", "sess-1"),
        ("0198c2a4-7b1e-7c3d-9f00-123456789abc", "0198c2a4-7b1e-7c3d-9f00-123456789abc"),
        ("a.b_c-D", "a.b_c-D"),
        ("~", "~007E"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("a/b", "a~002Fb"),
        ("a\\b", "a~005Cb"),
        ("a\x00b", "a~0000b"),
        ("with space", "with~0020space"),
        ("笔记", "~7B14~8BB0"),
        ("😀", "~D83D~DE00"),
        ("\ud800", "~D800"),
        ('unicode/引号"/slash\\/line\n', "unicode~002F~5F15~53F7~0022~002Fslash~005C~002Fline~000A"),
    ],
)
def test_encode_segment_matches_upstream(raw: str, encoded: str) -> None:
    assert encode_segment(raw) == encoded
    assert decode_segment(encoded) == raw


def test_encode_segment_rejects_empty() -> None:
    with pytest.raises(ValueError, match="cannot encode an empty path segment"):
        encode_segment("")


@pytest.mark.parametrize(
    ("name", "decoded"),
    [("a~007", None), ("a~007e", None), ("~0041", None), ("a b", None), ("", None), ("x~D83D", "x\ud83d")],
)
def test_decode_segment_only_accepts_canonical_names(name: str, decoded: str | None) -> None:
    assert decode_segment(name) == decoded


@given(st.text(min_size=1))
def test_encode_segment_is_one_safe_segment(raw: str) -> None:
    segment = encode_segment(raw)
    assert segment not in (".", "..")
    assert "/" not in segment and "\\" not in segment and "\x00" not in segment
    assert segment.isascii()
    assert decode_segment(segment) == raw


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/home/u/proj", "--home-u-proj--"),
        ("/", "--root--"),
        ("C:\\Users\\x", "--C-Users-x--"),
        ("//a::b\\\\c", "--a-b-c--"),
        ("/home/ü/proj", "--home-~00FC-proj--"),
        ("/a~b", "--a~007Eb--"),
        ("rel/dir", "--rel-dir--"),
        ("/x/" + "a" * 300, "--x-" + "a" * 249 + "--"),
    ],
)
def test_project_key_matches_upstream(cwd: str, key: str) -> None:
    assert project_key(cwd) == key


def test_project_key_rejects_empty() -> None:
    with pytest.raises(ValueError, match="cannot encode an empty project path"):
        project_key("")


def test_log_path_layout() -> None:
    assert log_path("/r", "/home/u/proj", "s", "zstd") == "/r/--home-u-proj--/s/session.jsonl.zstd"
    assert log_path("/r", None, "s", "none") == "/r/_no-cwd/s/session.jsonl"


@pytest.mark.parametrize(
    "hostile", ["..", ".", "../../etc", "/etc/passwd", "a/../../b", "\\..\\x", "x\x00y", "~"]
)
def test_hostile_ids_stay_inside_the_root(hostile: str) -> None:
    path = log_path("/r", "/w", hostile, "none")
    assert os.path.normpath(path) == path
    assert is_within("/r", path)
    assert os.path.dirname(os.path.dirname(path)) == "/r/--w--"


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]) -> None:
    home = os.path.expanduser("~")
    assert default_root({}) == os.path.join(home, ".dsh", "sessions")
    assert default_root({"DSH_HOME": "   "}) == os.path.join(home, ".dsh", "sessions")
    assert default_root({"DSH_HOME": "/opt/dsh"}) == "/opt/dsh/sessions"
    assert default_root({"DSH_HOME": "~/alt"}) == os.path.join(home, "alt", "sessions")
    monkeypatch.chdir(tmp_path)
    assert default_root({"DSH_HOME": "rel"}) == os.path.join(os.fspath(tmp_path), "rel", "sessions")
    monkeypatch.setenv("DSH_HOME", "/from/env")
    assert resolve_root(None) == "/from/env/sessions"
    assert resolve_root("/x/../y/") == "/y"


def test_is_within() -> None:
    assert is_within("/r", "/r/a")
    assert not is_within("/r", "/r")
    assert not is_within("/r", "/rx/a")
    assert not is_within("/r", "/a")
