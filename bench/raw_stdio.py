"""Server-side latency of one tool over stdio, without an SDK client.

The mcp SDK's client validates every structured result with Python jsonschema, which costs
seconds on multi-MiB results; this script speaks JSON-RPC itself, so the time is the server's
(plus the pipe): from writing the request line to reading the whole response line.

    .venv/bin/python bench/raw_stdio.py BUNDLE TOOL ['{"json": "arguments"}'] [--calls N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("tool")
    parser.add_argument("arguments", nargs="?", default="{}")
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": "off"}
    server = subprocess.Popen(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", os.path.abspath(args.bundle)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-stdio-bench", "version": "1"}}})
    server.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    size = 0
    try:
        for n in range(args.calls):
            start = time.perf_counter()
            send({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                  "params": {"name": args.tool, "arguments": json.loads(args.arguments)}})
            line = server.stdout.readline()
            times.append(time.perf_counter() - start)
            size = len(line)
    finally:
        server.terminate()
    warm = times[1:] or times
    print(f"{args.tool}: first {times[0] * 1000:.1f} ms, warm median "
          f"{statistics.median(warm) * 1000:.1f} ms over {len(warm)} calls, "
          f"response {size / 1048576:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
