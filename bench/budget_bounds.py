"""What the budget bounds cost at their worst: the server's peak RSS and reply sizes when a client's
settings ask for the largest budgets, for docs/limits.md.

    python -m bench.budget_bounds [--sessions N] [--big-mb M] [--before CHECKOUT]

Writes a store of ``N`` small sessions plus one whose messages add up to ``M`` MB (plain logs),
starts the language server (this checkout's, and ``--before``'s server/ too when given, on the same
store) with ``maxReferenceBytes`` and
``candidateLimit`` at 2^53-1, then reports the bytes of a completion reply (``@``), of the preview of
one mention of the big session, and the server's VmHWM. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "lsp")]

from lsp_support import Spec, initialize_params, start, write_store  # noqa: E402
from pytest_lsp import make_test_lsp_client  # noqa: E402

from dsh_session_reference.uri import format_session_reference_mention  # noqa: E402

HUGE = 2**53 - 1


def _vm_hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def _store(root: Path, sessions: int, big_mb: int) -> Path:
    specs = [Spec(f"s-{n:06}", "/work/p", f"session {n}", [("user", "hi")]) for n in range(sessions)]
    chunk = "x" * (1 << 20)
    big = [("user" if i % 2 == 0 else "assistant", chunk) for i in range(big_mb)]
    if len(big) % 2:
        big.append(("assistant", "ok"))
    specs.append(Spec("s-big", "/work/p", "big", big))
    return write_store(root, specs, "none")


async def measure(server_dir: Path, store: Path, workspace: Path) -> dict[str, int]:
    client = make_test_lsp_client()
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SESSION_ID")}
    env["DSH_HOME"] = str(workspace / "dsh-home")
    env["PYTHONPATH"] = str(server_dir)
    await client.start_io(sys.executable, "-m", "dsh_session_reference", "lsp", "--stdio", env=env)
    preset = "visual-studio-code@1.139"
    params = initialize_params(preset, workspace, store, maxReferenceBytes=HUGE, candidateLimit=HUGE)
    session = await start(client, preset, params)
    uri = session.open(workspace, "@")
    completion = await session.complete(uri)
    completion_bytes = len(json.dumps(client.protocol._converter.unstructure(completion)).encode())
    mention = session.open(workspace, f"see {format_session_reference_mention('s-big', 'big')}")
    preview = await session.command("dshSessionReference.preview", mention)
    model = await session.command("dshSessionReference.modelText", mention)
    server = client._server
    assert server is not None
    peak = _vm_hwm_kb(server.pid)
    await asyncio.wait_for(client.shutdown_session(), 60)
    await client.stop()  # type: ignore[no-untyped-call]
    return {
        "completion_rows": len(completion.items),
        "completion_reply_bytes": completion_bytes,
        "preview_bytes": len(preview["text"].encode()),
        "model_text_bytes": len(model["text"].encode()),
        "peak_rss_kb": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--big-mb", type=int, default=60)
    parser.add_argument("--before", type=Path, help="another checkout, measured on the same store")
    args = parser.parse_args()
    checkouts = {"after": HERE.parent} | ({"before": args.before} if args.before else {})
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch) / "workspace"
        (workspace / "dsh-home").mkdir(parents=True)
        store = _store(Path(scratch) / "sessions", args.sessions, args.big_mb)
        for name, checkout in checkouts.items():
            figures = asyncio.run(measure(checkout / "server", store, workspace))
            print(name, json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
