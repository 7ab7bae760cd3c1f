"""The one assembly (``assembly.py``) both front ends build their store, resolver and target with."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_session_reference.assembly import (
    make_resolver,
    open_live,
    open_source,
    sessions_root,
    target_session,
)
from dsh_session_reference.config import resolver_config
from dsh_session_reference.resolver import SessionReferenceResolver
from dsh_session_reference.store.catalog import SessionCatalog
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.jsonl_store import JsonlSessionStore


def test_target_falls_back_to_the_environment_once() -> None:
    assert target_session(None, {"DSH_SESSION_ID": "env"}) == "env"
    assert target_session("", {"DSH_SESSION_ID": "env"}) == "env"  # an empty setting is not a target
    assert target_session("set", {"DSH_SESSION_ID": "env"}) == "set"
    assert target_session(None, {"DSH_SESSION_ID": ""}) is None
    assert target_session(None, {}) is None


def test_root_is_the_first_choice_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sessions_root(str(tmp_path), "/fallback") == str(tmp_path)
    assert sessions_root("", str(tmp_path)) == str(tmp_path)
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    assert sessions_root(None, "") == str(tmp_path / "home" / "sessions")


def test_each_front_end_gets_its_store(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    plain = open_source(str(tmp_path), index=False)
    assert type(plain) is JsonlSessionStore
    indexed = open_source(str(tmp_path), index_dir=cache)
    assert type(indexed) is IndexedSessionStore and indexed.autoflush
    searching = open_source(str(tmp_path), body_search=True, index_dir=cache)
    assert isinstance(searching, IndexedSessionStore)
    assert isinstance(searching.catalog, SessionCatalog) and not searching.catalog.background
    live = open_live(str(tmp_path), index_dir=cache)
    try:
        assert isinstance(live, IndexedSessionStore) and live.catalog is not None
        assert live.catalog.background and not live.autoflush  # the background thread writes the file
        assert live.root == plain.root == str(tmp_path)
    finally:
        live.close()
        searching.close()


def test_the_config_is_passed_whole(tmp_path: Path) -> None:
    config = resolver_config(2, 7, 4096)
    store = JsonlSessionStore(tmp_path)
    plain = make_resolver(store, config)
    assert type(plain) is SessionReferenceResolver and plain.config is config and plain.store is store
    assert not plain.body_search
    searching = make_resolver(store, config, body_search=True)
    assert searching.body_search and searching.config is config
