"""``python -m bench`` (or ``scripts/bench``): benchmarks side by side with the published upstream.

    scripts/bench                      # the quick setting: 1,000 sessions, a few minutes
    scripts/bench --setting standard   # 10,000 sessions and three ~107 MB logs (about 20 minutes)
    scripts/bench --setting full       # 50,000 sessions (generation alone takes a long while)
    scripts/bench verify               # the generator writes exactly upstream's bytes
    scripts/bench generate --setting standard

Stores are generated once into ``${XDG_CACHE_HOME:-~/.cache}/dsh-session-reference/bench/`` and
reused; results are printed and written to ``docs/benchmarks.md`` (one section per setting).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time

from .generate import ensure_store
from .report import floor_line, markdown, text_table
from .run import REPO, SETTINGS, Suite, node_of, upstream_dir, verify_bytes

DOC = REPO / "docs" / "benchmarks.md"
INTRO = """# Benchmarks

Produced by `scripts/bench` (`python -m bench`); do not edit the sections by hand, rerun the suite.
Each setting generates a realistic dsh sessions root in the real on-disk format (log sizes spread
log-normally around 50 KB, a tail of huge logs, streamed reasoning and text as packed chunk rows,
tool calls and results, titles, compaction checkpoints, subagents, crashed turns), once, into the
user's cache folder; `scripts/bench verify` checks that upstream's own `JsonlSessionPersistence`
writes byte-identical files for the same sessions. The same cases then run through this project
(the CLI in a fresh process; the language server over stdio as an editor drives it) and through the
published `@deepseek-ai/dsh-session-reference@0.1.0-rc.8` on Node 24 with its JSONL persistence over
the same root. Times are wall-clock medians (n = samples); a cold case includes starting the runtime.
"Warm server" is, for upstream, the same call repeated in one Node process. Upstream has no language
server, so its warm `listCandidates` is the comparison for a completion round trip.
"""


def write_doc(setting: str, section: str) -> None:
    text = DOC.read_text() if DOC.exists() else INTRO
    begin, end = f"<!-- setting:{setting} -->", f"<!-- /setting:{setting} -->"
    block = f"{begin}\n{section}\n{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", nargs="?", default="run", choices=("run", "verify", "generate"))
    parser.add_argument("--setting", default="quick", choices=sorted(SETTINGS))
    parser.add_argument("--sessions", type=int, help="override the setting's session count")
    parser.add_argument("--compression", choices=("zstd", "none"), help="override the store's encoding")
    parser.add_argument("--no-upstream", action="store_true", help="measure this project only")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument(
        "--reuse-upstream",
        action="store_true",
        help="take upstream's figures from this store's last run instead of rerunning it",
    )
    args = parser.parse_args(argv)

    settings = SETTINGS[args.setting]
    spec = settings.spec
    section = args.setting  # docs/benchmarks.md keeps one section per setting and variant
    if args.sessions is not None:
        spec = dataclasses.replace(spec, sessions=args.sessions)
        section += f"-{args.sessions}"
    if args.compression is not None and args.compression != spec.compression:
        spec = dataclasses.replace(spec, compression=args.compression)
        section += "-plain" if args.compression == "none" else f"-{args.compression}"
    settings = dataclasses.replace(settings, spec=spec)

    if args.action == "verify":
        verify_bytes(upstream_dir(), "zstd")
        verify_bytes(upstream_dir(), "none")
        return 0
    manifest = ensure_store(spec)
    if args.action == "generate":
        print(manifest.root)
        return 0
    install = None if args.no_upstream else upstream_dir()
    started = time.perf_counter()
    suite = Suite(manifest, settings, install)
    try:
        suite.run(reuse_upstream=args.reuse_upstream)
    finally:
        suite.close()
    measures = list(suite.results.values())
    print()
    print(text_table(measures, suite.floor))
    print(f"floor: {floor_line(suite.floor)}")
    for check in suite.checks:
        print(check)
    notes = [f"{m.case}: {m.note}" for m in measures if m.note]
    notes.append(f"the whole run took {time.perf_counter() - started:.0f} s")
    if suite.reused:
        notes.append(
            "upstream's figures are from an earlier run on the same store and machine (--reuse-upstream)"
        )
    if not args.no_docs:
        write_doc(
            section,
            markdown(
                manifest,
                section,
                measures,
                suite.checks,
                None if install is None else node_of(install),
                notes,
                suite.floor,
            ),
        )
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0 if all(check.startswith("identical") for check in suite.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
