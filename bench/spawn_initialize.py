"""Spawn → ``initialize`` answered over stdio, for one or more installs side by side.

Each round spawns ``PYTHON -m bundle_mcp.cli serve BUNDLE`` once per install (in turn, so a
noisy neighbour hits every install alike), writes one ``initialize`` line and times until the
whole answer line is read; the process is then stopped. It prints the median, the minimum and
the maximum per install, and whether every install answered with the same bytes.

    .venv/bin/python bench/spawn_initialize.py BUNDLE --python /work/main/.venv/bin/python \\
        --python .venv/bin/python --runs 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bench-spawn", "version": "1"}},
}).encode() + b"\n"


def spawn_once(python: str, bundle: str, cache_dir: str) -> tuple[float, bytes]:
    """Seconds from the spawn to the whole answer line, and the line."""
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
    started = time.perf_counter()
    process = subprocess.Popen(
        [python, "-m", "bundle_mcp.cli", "serve", bundle],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
    finally:
        process.kill()
        process.wait(30)
        process.stdin.close()
        process.stdout.close()
    if not line:
        raise RuntimeError(f"{python}: no answer to initialize")
    return elapsed, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--python", action="append", required=True,
                        help="an interpreter with bundle_mcp installed (repeat to compare)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cache-dir", default=None,
                        help="BUNDLE_MCP_CACHE_DIR of the servers (default: a fresh folder "
                             "per install, kept for every run)")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {p: [] for p in args.python}
    answers: dict[str, set[bytes]] = {p: set() for p in args.python}
    with tempfile.TemporaryDirectory(prefix="bundle-mcp-spawn-") as tmp:
        caches = {p: args.cache_dir or os.path.join(tmp, f"cache{n}")
                  for n, p in enumerate(args.python)}
        for _ in range(args.runs):
            for python in args.python:
                elapsed, line = spawn_once(python, args.bundle, caches[python])
                samples[python].append(elapsed)
                answers[python].add(line)
    for python, values in samples.items():
        print(f"{python}: median {statistics.median(values) * 1000:.0f} ms "
              f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, "
              f"{len(values)} spawns)")
    distinct = set().union(*answers.values())
    print("answers byte-identical across installs and runs:", len(distinct) == 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
