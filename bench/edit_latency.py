"""Latency of the first call after one file was edited, server-side over stdio.

Starts ``bundle-mcp serve BUNDLE``, warms ``read_concept``, then five times appends a line to a
different concept file, times the next ``read_concept`` (raw JSON-RPC, no SDK client), and
restores the file. The bundle is modified while it runs: use a generated copy.

    .venv/bin/python bench/edit_latency.py /tmp/b10k core/hub
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    bundle, concept_id = os.path.abspath(sys.argv[1]), sys.argv[2]
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": tempfile.mkdtemp(prefix="edit-bench-")}
    server = subprocess.Popen(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", bundle],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    counter = iter(range(1, 1_000_000))

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def call() -> float:
        start = time.perf_counter()
        send({"jsonrpc": "2.0", "id": next(counter), "method": "tools/call",
              "params": {"name": "read_concept", "arguments": {"concept_id": concept_id}}})
        server.stdout.readline()
        return time.perf_counter() - start

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "edit-latency-bench", "version": "1"}}})
    server.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    try:
        for _ in range(3):
            call()
        time.sleep(3)  # let the first background parse-cache write finish
        files = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(bundle)
            for name in names
            if name.endswith(".md") and name not in ("index.md", "log.md")
        )[200:205]
        samples = []
        for path in files:
            with open(path, encoding="utf-8") as handle:
                original = handle.read()
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\nedited line\n")
            samples.append(call())
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(original)
            call()
    finally:
        server.terminate()
    print("edited read_concept ms:", [round(s * 1000, 1) for s in samples],
          "median", round(statistics.median(samples) * 1000, 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
