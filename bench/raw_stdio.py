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
from typing import Any


class RawServer:
    """``bundle-mcp serve BUNDLE`` on a pipe, spoken to in plain JSON-RPC lines."""

    def __init__(self, bundle: str, cache_dir: str = "off") -> None:
        env = {**os.environ, "BUNDLE_MCP_CACHE_DIR": cache_dir}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", os.path.abspath(bundle)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self._ids = iter(range(1, 1 << 30))
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw-stdio-bench", "version": "1"}}})
        self._receive()
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, int]:
        """Seconds from request to the whole response line, and that line's size in bytes."""
        start = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": next(self._ids), "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}})
        line = self._receive()
        return time.perf_counter() - start, len(line)

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(10)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write((json.dumps(message) + "\n").encode())
        self._process.stdin.flush()

    def _receive(self) -> bytes:
        assert self._process.stdout is not None
        return self._process.stdout.readline()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("tool")
    parser.add_argument("arguments", nargs="?", default="{}")
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    server = RawServer(args.bundle)
    try:
        samples = [server.call(args.tool, json.loads(args.arguments)) for _ in range(args.calls)]
    finally:
        server.close()
    warm = [seconds for seconds, _ in samples[1:]] or [samples[0][0]]
    print(f"{args.tool}: first {samples[0][0] * 1000:.1f} ms, warm median "
          f"{statistics.median(warm) * 1000:.1f} ms over {len(warm)} calls, "
          f"response {samples[-1][1] / 1048576:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
