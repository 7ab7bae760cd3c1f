"""Settings shared by the hardening suite: the quick CI slice and the long local run.

``DSH_SR_HYPOTHESIS_PROFILE=long`` (the variable the conformance suite reads
too) multiplies every property test's examples by :data:`LONG_FACTOR` and the
language-server stress loops by :data:`LONG_FACTOR` as well; the default
``ci`` keeps the whole directory well under two minutes on two cores.
Profiles are applied per test, never loaded globally, so other suites keep
their own settings.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The language-server helpers live beside the LSP tests (a plain directory, not a package).
_LSP_TESTS = str(Path(__file__).resolve().parent.parent / "lsp")
if _LSP_TESTS not in sys.path:
    sys.path.insert(0, _LSP_TESTS)

PROFILE_ENV = "DSH_SR_HYPOTHESIS_PROFILE"
PROFILE = os.environ.get(PROFILE_ENV, "ci")
if PROFILE not in ("ci", "long"):
    raise pytest.UsageError(f"{PROFILE_ENV} must be 'ci' or 'long', not {PROFILE!r}")
LONG = PROFILE == "long"
LONG_FACTOR = 20

_BASE = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=True,
)


def hardening_settings(ci_examples: int) -> settings:
    """Hypothesis settings for one property: ``ci_examples`` in CI, ``LONG_FACTOR`` times that in the long run."""
    return settings(_BASE, max_examples=ci_examples * (LONG_FACTOR if LONG else 1))


def scaled(ci_count: int) -> int:
    """A stress loop's size: ``ci_count`` in CI, ``LONG_FACTOR`` times that in the long run."""
    return ci_count * (LONG_FACTOR if LONG else 1)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace folder for language-server sessions (documents live here, never under a root)."""
    return tmp_path_factory.mktemp("workspace")
