"""Each tool's first call right after a restart, before the warm-up is done (issue 29).

``make bench`` times every tool's first call after a restart once the server is ready (its
warm-up done). A client that restarts a server calls at once. This starts one
``bundle-mcp serve BUNDLE`` per tool on a filled parse cache (raw JSON-RPC over stdio, as
``bench/targets.py``'s ``Session``), makes that tool's ``make bench`` call as the first call,
then a second one at once, waits for "ready" and takes the median of three warm calls.

The first call includes the load (capturing the bundle to know its revision); the second
meets the server while it imports the MCP SDK after its first answer (``handshake.py``) and
while the warm-up runs.

    .venv/bin/python bench/first_calls.py /work/bench10k /tmp/cache-folder
    .venv/bin/python bench/first_calls.py /work/bench10k /tmp/cache-folder list_concepts

The cache folder is filled first when it holds no ``filled`` marker (a cold session: every
call, ready, the save).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from memory import bench_info  # noqa: E402  (a sibling script)
from targets import Session, caps_arguments, cases, wait_for_pack  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("cache", help="the parse-cache folder (filled first if need be)")
    parser.add_argument("tools", nargs="*", help="only these tools (default: every case)")
    args = parser.parse_args()
    bundle, cache = args.bundle.resolve(), args.cache
    markdown = list(bundle.rglob("*.md"))
    serve_args = caps_arguments(len(markdown), sum(p.stat().st_size for p in markdown))
    all_cases = cases(bundle, bench_info(bundle))
    marker = Path(cache, "filled")
    if not marker.exists():
        with tempfile.TemporaryDirectory() as tmp:
            session = Session(str(bundle), cache, tmp, serve_args)
            session.start()
            try:
                session.call(all_cases[0].tool, all_cases[0].arguments)
                session.wait_ready()
                for case in all_cases:
                    session.call(case.tool, case.arguments)
                wait_for_pack(cache)
            finally:
                session.stop()
            wait_for_pack(cache)
        marker.write_text("", encoding="utf-8")
    print(f"{'call':<28} {'first':>10} {'second':>10} {'warm':>9}  ready")
    for case in all_cases:
        if args.tools and case.tool not in args.tools:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            session = Session(str(bundle), cache, tmp, serve_args)
            session.start()
            try:
                first, _ = session.call(case.tool, case.arguments)
                second, _ = session.call(case.tool, case.arguments)
                ready = session.wait_ready()
                warm = statistics.median(
                    session.call(case.tool, case.arguments)[0] for _ in range(3))
            finally:
                session.stop()
        print(f"{case.label:<28} {first * 1000:8.1f} ms {second * 1000:7.1f} ms "
              f"{warm * 1000:6.1f} ms  {ready:.1f} s", flush=True)


if __name__ == "__main__":
    main()
