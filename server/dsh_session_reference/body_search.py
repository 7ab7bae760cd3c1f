"""Opt-in body search: an ``@`` query that also matches what was said in a session.

Upstream's candidate discovery matches ids, cwds and titles only, and the
seed keeps it that way by default. With ``bodySearch`` on (a language-server
setting, ``--body-search`` on the CLI), the candidates upstream would give come
first, unchanged, and sessions whose message text matches the query follow, as
:class:`BodyCandidate` rows that say they matched in the messages and show
where. Message text is indexed with SQLite FTS5 next to the title index
(word-prefix matching; the store decides what text is indexed), so a query
never reads logs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .cancellation import AbortSignal
from .candidates import label_for
from .config import is_positive_safe_integer
from .jsjson import js_normalize
from .resolver import AgentRef, Candidate, SessionReferenceResolver, run_blocking


@dataclass(frozen=True)
class BodyCandidate(Candidate):
    """A candidate found in message text rather than by id, cwd or title."""

    snippet: str = ""
    matched: str = ""
    """The query it matched (editors filter on it: the row's label need not contain it)."""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "match": "body", "snippet": self.snippet}


class BodySearchResolver(SessionReferenceResolver):
    """``list_candidates`` plus body matches after the upstream-exact candidates, up to the limit."""

    async def list_candidates(
        self,
        agent: AgentRef,
        query: str = "",
        limit: object = None,
        signal: AbortSignal | None = None,
    ) -> list[Candidate]:
        exact = await super().list_candidates(agent, query, limit, signal)
        source = self.query
        chosen = self.config.candidate_limit if limit is None else limit
        if query.strip() == "" or not is_positive_safe_integer(chosen):
            return exact
        room = int(chosen) - len(exact)
        if room <= 0:
            return exact
        self_id = None if agent.id is None else js_normalize(agent.id)
        shown = {candidate.session_id for candidate in exact}
        records = await run_blocking(lambda stop: self.query.list_sessions(stop), signal)
        others = [record for record in records if record.id != self_id and record.id not in shown]
        matches = await asyncio.to_thread(source.search_bodies, query, others, room)
        if not matches:
            return exact
        chosen_records = [match.record for match in matches]
        titles = await run_blocking(lambda stop: self.query.read_titles(chosen_records, stop), signal)
        found: list[Candidate] = list(exact)
        for match, observation in zip(matches, titles, strict=True):
            record = match.record
            label = label_for(record, observation)
            found.append(BodyCandidate(record.id, label, record.cwd, record.created_at, match.snippet, query))
        return found
