"""The tested invariant: a document has error diagnostics exactly when ``parse`` + ``prepare`` fails.

Stores are written to disk with the real log writer for every example (ids
with brackets, backslashes, newlines and emoji; titles; small and large
sessions; sometimes a corrupt log), documents mix valid, unknown, self,
duplicate, bare, malformed and noncanonical mentions with text that can glue
onto them, and the limits vary so that ``maxReferences`` and the byte budget
are hit too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_support import Spec, write_store

from dsh_session_reference.analysis import analyze
from dsh_session_reference.assembly import open_live
from dsh_session_reference.errors import SessionReferenceError
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.store.layout import log_path
from dsh_session_reference.uri import (
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)

# Hostile characters too: path syntax, NUL and other controls, bidi overrides, a lone surrogate.
HOSTILE = ["/", ".", "\x00", "\x1b", "\u202e", "\ud800", "<"]
ID_CHARS = st.sampled_from(["a", "b", "-", "]", "\\", "é", "😀", " ", "\n", "[", *HOSTILE])
ids = st.text(ID_CHARS, min_size=1, max_size=6)
labels = st.text(st.sampled_from(["L", "]", "\\", "\n", " ", "(", ")", "😀", *HOSTILE]), max_size=5)
# DSH_SR_HYPOTHESIS_PROFILE=long (the hardening and conformance suites' long run) multiplies the examples.
EXAMPLES = 100 * (20 if os.environ.get("DSH_SR_HYPOTHESIS_PROFILE") == "long" else 1)
glue = st.sampled_from(["", " ", "x", ".", "\n", ")", "@"])


@st.composite
def stores(draw: st.DrawFn) -> tuple[list[Spec], str | None]:
    session_ids = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    specs = []
    for number, session_id in enumerate(session_ids):
        messages = draw(
            st.lists(
                st.tuples(st.sampled_from(["user", "assistant"]), st.text("xy <é", max_size=300)), max_size=3
            )
        )
        specs.append(
            Spec(
                session_id,
                draw(st.sampled_from([None, "/w", "/other"])),
                draw(st.none() | labels),
                messages,
                age_minutes=number,
            )
        )
    corrupt = draw(st.one_of(st.none(), st.none(), st.none(), st.sampled_from(session_ids)))
    return specs, corrupt


def noncanonical(session_id: str) -> str:
    escaped = json.dumps(session_id, ensure_ascii=True).replace("a", "\\u0061")
    if escaped == json.dumps(session_id, ensure_ascii=True):
        escaped = json.dumps(session_id, ensure_ascii=True) + " "
    return "dsh-session:" + base64.urlsafe_b64encode(escaped.encode()).rstrip(b"=").decode()


@st.composite
def documents(draw: st.DrawFn, known: list[str]) -> str:
    mostly_known = st.sampled_from(known) | st.sampled_from(known) | st.sampled_from(known) | ids
    valid = st.one_of(
        st.builds(format_session_reference_mention, mostly_known, st.none() | labels),
        st.builds(lambda uri: uri + " ", st.builds(encode_session_reference_uri, mostly_known)),
    )
    risky = st.one_of(
        st.text(st.sampled_from(["a", " ", "@", "[", "]", "(", ")", "\\", "\n", ":"]), max_size=8),
        st.builds(encode_session_reference_uri, mostly_known),
        st.builds(noncanonical, mostly_known),
        st.sampled_from(["dsh-session:IiJ", "dsh-session:MTIz", "@[x](dsh-session:)", "dsh-session:%%"]),
    )
    pieces = draw(st.lists(valid, min_size=1, max_size=4))
    if draw(st.booleans()):
        pieces += draw(st.lists(st.tuples(risky, glue).map("".join), max_size=3))
    pieces = draw(st.permutations(pieces))
    return " ".join(pieces)


def corrupt_log(root: Path, spec: Spec) -> None:
    """Append a message without an id at the next seq: the header still lists, every surface read fails."""
    path = Path(log_path(str(root), spec.cwd, spec.session_id, "none"))
    seq = len(path.read_bytes().splitlines()) - 1
    with path.open("ab") as handle:
        handle.write(b'{"type":"user/message","seq":%d,"time":1,"data":{}}\n' % seq)


async def prepare_fails(text: str, resolver: SessionReferenceResolver, agent: AgentRef) -> bool:
    try:
        parsed = parse_session_reference_text(text)
        await resolver.prepare(agent, [{"type": "text", "text": parsed.text}], parsed.references)
    except SessionReferenceError:
        return True
    return False


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_error_diagnostics_iff_prepare_fails(data: st.DataObject) -> None:
    specs, corrupt = data.draw(stores())
    known = [spec.session_id for spec in specs]
    text = data.draw(documents(known))
    target = data.draw(st.none() | st.none() | st.sampled_from(known))
    limits = {
        "max_references": data.draw(st.integers(1, 3)),
        "max_reference_bytes": data.draw(st.sampled_from([90, 200, 400, 65_536, 65_536])),
    }
    root = Path(tempfile.mkdtemp(prefix="dsh-invariant-"))
    try:
        write_store(root, specs, "none")
        for spec in specs:
            if spec.session_id == corrupt:
                corrupt_log(root, spec)
        plain = SessionReferenceResolver(JsonlSessionStore(root), **limits)
        cached = SessionReferenceResolver(open_live(str(root)), **limits)
        agent = AgentRef(target, "/w")

        async def check() -> None:
            expected = await prepare_fails(text, plain, agent)
            seen = []
            # The plain store finds each record alone (find_record); the cached source lists (twice:
            # cold, then warm). Both must report the very same findings.
            for resolver in (plain, cached, cached):
                analysis = await analyze(text, resolver, agent)
                assert analysis.has_errors == expected, (text, [f.message for f in analysis.findings])
                seen.append(analysis.findings)
            assert seen[0] == seen[1] == seen[2], (text, seen)

        asyncio.run(check())
    finally:
        shutil.rmtree(root)
