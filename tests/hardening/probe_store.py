"""``python -m hardening.probe_store ROOT [ID...]``: what the store and the resolver make of a root, as JSON.

Run in a subprocess (under the audit hook, or with DAC capabilities dropped)
when the question is what the library itself opens or is allowed to read.
Ids are read from a JSON file instead when the first id is ``@FILE`` (ids may
hold anything, NUL included, which argv cannot carry).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from dsh_session_reference.errors import SessionReferenceError
from dsh_session_reference.model import StoreError
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store import JsonlSessionStore


def _store_outcome(store: JsonlSessionStore, session_id: str) -> list[Any]:
    try:
        snapshot = store.read_surface(session_id)
    except StoreError as error:
        return ["error", error.code, error.message]
    return ["ok", snapshot.captured_through_seq, len(snapshot.events)]


async def _probe(root: str, ids: list[str], query: str) -> dict[str, Any]:
    store = JsonlSessionStore(root)
    resolver = SessionReferenceResolver(store, candidate_limit=1000)
    agent = AgentRef(None, "/w")
    records = store.list_sessions()
    titles = store.read_titles(records)
    candidates = await resolver.list_candidates(agent, query)
    prepared: dict[str, list[Any]] = {}
    for session_id in ids:
        try:
            result = await resolver.prepare(agent, [], [{"sessionId": session_id}])
        except SessionReferenceError as error:
            prepared[session_id] = ["error", error.code, error.message]
            continue
        context = result.additional_context
        prepared[session_id] = ["ok", None if context is None else context.text]
    return {
        "listed": [record.id for record in records],
        "titles": {obs.session_id: obs.error or obs.title for obs in titles},
        "candidates": {candidate.session_id: candidate.label for candidate in candidates},
        "reads": {session_id: _store_outcome(store, session_id) for session_id in ids},
        "prepared": prepared,
    }


def main(argv: list[str]) -> None:
    root, *rest = argv
    query = ""
    if rest[:1] == ["--query"]:
        query, rest = rest[1], rest[2:]
    if rest and rest[0].startswith("@"):
        with open(rest[0][1:], encoding="utf-8") as handle:
            rest = json.load(handle)
    result = asyncio.run(_probe(root, rest, query))
    sys.stdout.write(json.dumps(result, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
