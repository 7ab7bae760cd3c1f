"""The end-of-run line saying how much was compared with upstream, whichever process compared it.

In one process the conformance conftest writes it from its own oracles. Under pytest-xdist the
workers compare and the controller, which never loads that conftest, writes it: each worker sends
its counts at the end of its session (``workeroutput``) and ``tests/conftest.py`` adds them up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

COUNTS = ("cases", "round_trips", "seconds")


def summary_line(runs: Iterable[Mapping[str, Any]], elapsed: float) -> str:
    """One line for the counts of every run (all of one profile and upstream version)."""
    runs = list(runs)
    total = {name: sum(float(run[name]) for run in runs) for name in COUNTS}
    return (
        f"conformance ({runs[0]['profile']} profile): {int(total['cases'])} cases compared with upstream "
        f"{runs[0]['upstream']} in {int(total['round_trips'])} oracle round trips "
        f"({total['seconds']:.1f} s inside the oracle, {elapsed:.1f} s total)"
    )
