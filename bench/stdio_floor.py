"""What a call costs over stdio before any tool runs (issue 29's warm targets).

Starts ``bundle-mcp serve BUNDLE`` as ``make bench`` does (raw JSON-RPC lines: ``targets.py``'s
``Session``), waits until the bundle is warm, then times each of these as the median of
``--calls`` requests, after a tenth as many not counted:

- ``ping``: a request the SDK's server answers without a tool (the transport and the session);
- ``read_concept`` without its ``concept_id``: refused by the input contract before any tool
  runs, an error of a few hundred bytes (0.1 ms in process at 9,978 concepts): the SDK's
  path of a tool call, and the dispatcher's checks;
- ``read_concept`` of ``--concept`` (default: the first concept the bundle lists).

The first two differ by what the SDK's path of a tool call adds to a request; a warm call's
target below that floor cannot be met through the SDK on the machine that measured it.

    PYTHONPATH=src .venv/bin/python bench/stdio_floor.py /work/bench10k --concept core/hub

Times are a person's reading on a shared machine; no test asserts one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from targets import Session  # noqa: E402  (a sibling script)


def median_ms(request: Callable[[], float], calls: int) -> float:
    """The median of ``calls`` timings of ``request`` in milliseconds, after a tenth as many
    not counted (the first of a kind builds what later ones reuse)."""
    for _ in range(max(1, calls // 10)):
        request()
    return 1000 * statistics.median(request() for _ in range(calls))


def floors(bundle: str, concept: str | None, calls: int) -> dict[str, float]:
    """Each request's median in milliseconds, by name, on a warm server of ``bundle``."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as logs:
        session = Session(bundle, cache, logs)
        session.start()
        try:
            session.wait_ready()
            if concept is None:
                listed = json.loads(session.call("list_concepts", {})[1])
                concept = listed["result"]["structuredContent"]["concepts"][0]["id"]
            found = json.loads(session.call("read_concept", {"concept_id": concept})[1])
            if found["result"].get("isError"):
                raise SystemExit(f"read_concept {concept!r} failed: {found['result']}")
            return {
                "ping": median_ms(lambda: session.request("ping")[0], calls),
                "read_concept refused by its contract": median_ms(
                    lambda: session.call("read_concept", {})[0], calls),
                f"read_concept {concept}": median_ms(
                    lambda: session.call("read_concept", {"concept_id": concept})[0], calls),
            }
        finally:
            session.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--concept", help="the concept read (default: the first one listed)")
    parser.add_argument("--calls", type=int, default=200, help="requests timed of each kind")
    args = parser.parse_args(argv)
    found = floors(str(args.bundle.resolve()), args.concept, args.calls)
    for name, ms in found.items():
        print(f"{name:<48} median {ms:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
