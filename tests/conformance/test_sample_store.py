"""The other direction: the project's own writer (the built-in sample store) produces
logs that upstream's persistence reads, and both sides then give the same
candidates and snapshots. A sample that only the Python reader understood would
demonstrate a format dsh does not write."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_session_reference.sample import JULY_ID, SAMPLE_SESSION_IDS, write_sample_store
from dsh_session_reference.store.layout import Compression
from zstd_backends import by_compression

from . import python_side as py
from .conftest import Oracle
from .strategies import OMIT, Agent, ListOp, PrepareOp, ResolverConfigCase, StoreCase
from .test_resolver import compare, digest

OUTSIDE = Agent("agent outside the sample", "/home/dev/shop")


@pytest.fixture
def sample_root(compression: Compression) -> Iterator[tuple[Path, str]]:
    folder = Path(tempfile.mkdtemp(prefix="dsh-sr-sample-"))
    try:
        write_sample_store(folder, compression)
        yield folder, compression
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@by_compression
@pytest.mark.parametrize("budget", [65536, 2000, 400])
def test_sample_store_reads_the_same_on_both_sides(
    oracle: Oracle, sample_root: tuple[Path, str], budget: int
) -> None:
    root, compression = sample_root
    # The July-era session is left out of the snapshot comparison on purpose: the project
    # projects its envelope.displayContent (the person's own words, as the product asks),
    # while upstream at rc.8 projects the baked content.
    compared = [i for i in SAMPLE_SESSION_IDS if i != JULY_ID]
    ops: list[ListOp | PrepareOp] = [
        ListOp(OUTSIDE, None, OMIT),
        ListOp(OUTSIDE, "home", 3),
        ListOp(Agent(SAMPLE_SESSION_IDS[0], "/home/dev/shop"), "", OMIT, remote=True),
        *(PrepareOp(OUTSIDE, [{"type": "text", "text": "x"}], [{"sessionId": i}], False) for i in compared),
        PrepareOp(OUTSIDE, [{"type": "text", "text": "x"}], [{"sessionId": i} for i in compared[:3]], True),
    ]
    case = StoreCase([], compression, True, ResolverConfigCase(3, 50, budget), ops)
    before = digest(root)
    reply = oracle.require(
        "disk",
        root=str(root),
        compression=compression,
        config=case.config.oracle_spec(),
        ops=[op.oracle_spec() for op in ops],
    )
    assert reply["rootUnchanged"]
    listed = reply["results"][0]
    assert listed["ok"], listed
    assert {c["sessionId"] for c in listed["result"]} == set(SAMPLE_SESSION_IDS), (
        "upstream lists every sample session"
    )
    python = py.run_store_ops(root, case)
    assert digest(root) == before
    for op, mine, theirs in zip(ops, python, reply["results"], strict=True):
        compare(mine, py.upstream_op_outcome(op, theirs), case, op, f"sample store ({compression}, {budget})")
