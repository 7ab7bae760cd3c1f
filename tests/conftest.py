"""Make the package importable from a plain checkout too (the editable install also does); under
pytest-xdist, add up what each worker compared with upstream (``conformance.summary``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.summary import summary_line

SERVER = Path(__file__).resolve().parent.parent / "server"
if str(SERVER) not in sys.path:
    sys.path.insert(0, str(SERVER))

_STARTED = time.perf_counter()
_COMPARED: list[dict[str, object]] = []
"""What each pytest-xdist worker's oracles compared, as it sent it when it finished."""


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    compared = getattr(node, "workeroutput", {}).get("oracle")
    if compared is not None:
        _COMPARED.append(compared)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _COMPARED:
        terminalreporter.write_line(summary_line(_COMPARED, time.perf_counter() - _STARTED))
