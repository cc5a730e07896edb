"""HTTP throughput of ``bundle-mcp serve --http``: N keep-alive clients posting ``tools/call``.

No MCP SDK client: each connection is a raw asyncio socket that writes one pre-encoded POST
and reads the response by its Content-Length, so the client costs a few tens of microseconds
per call. The server runs in its own process (started here, ready once ``/readyz`` says 200);
the script reports its own CPU use and the server's, so a saturated client is visible.

    .venv/bin/python bench/http_load.py /tmp/b10k --concurrency 32 --duration 10
    .venv/bin/python bench/http_load.py /tmp/b10k --serve-arg=--workers=2
    .venv/bin/python bench/http_load.py /tmp/b10k --src /tmp/before/src --src src   # A/B

Every ``--src`` is a separate server run (its PYTHONPATH), measured one after the other with
the same requests, so two trees can be compared at the same machine moment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
READY_SECONDS = 300.0
_URL_LINE = re.compile(rb"streamable HTTP on http://([^/\s]+)/mcp")


# ------------------------------------------------------------------------------- requests


def concept_ids(bundle: Path, count: int, seed: int) -> list[str]:
    """``count`` concept IDs of the bundle (not its index or log files), chosen at random."""
    ids = sorted(
        str(path.relative_to(bundle).with_suffix(""))
        for path in bundle.rglob("*.md")
        if path.stem not in ("index", "log")
    )
    return random.Random(seed).sample(ids, min(count, len(ids)))


def tool_arguments(tool: str, ids: list[str]) -> list[dict[str, Any]]:
    """Arguments for ``tool``, one set per concept ID (the hub for the neighbour tools)."""
    if tool in ("read_concept", "fetch_slice"):
        return [{"concept_id": cid} for cid in ids]
    if tool == "get_neighbors":
        return [{"concept_id": "core/hub", "limit": 20}]
    if tool == "search_concepts":
        return [{"query": "zq" + cid[-5:], "limit": 5} for cid in ids]
    raise SystemExit(f"no arguments known for {tool}; use read_concept, fetch_slice, "
                     "get_neighbors or search_concepts")


def encode_requests(host: str, tool: str, arguments: list[dict[str, Any]]) -> list[bytes]:
    """The whole HTTP/1.1 requests, encoded once: the timed loop only writes bytes.

    Stateless streamable HTTP needs no initialize and no session: each POST carries the
    protocol version header and accepts both JSON and SSE (the transport insists on both).
    """
    requests = []
    for number, args in enumerate(arguments, 1):
        body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                           "params": {"name": tool, "arguments": args}}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {PROTOCOL_VERSION}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        requests.append(head + body)
    return requests


# -------------------------------------------------------------------------------- clients


@dataclass
class Tally:
    """What the connections saw; ``recording`` is off during the warm-up."""

    recording: bool = False
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    checked: int = 0

    def error(self, what: str) -> None:
        if self.recording:
            self.errors[what] = self.errors.get(what, 0) + 1


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise ValueError("response without Content-Length")
    return status, await reader.readexactly(length)


def _failure(status: int, body: bytes) -> str | None:
    """Why a response is not a successful tool result, or None."""
    if status != 200:
        return f"http {status}"
    reply = json.loads(body)
    if "error" in reply:
        return f"jsonrpc {reply['error'].get('code')}"
    if reply.get("result", {}).get("isError"):
        return "tool " + str(reply["result"].get("structuredContent", {}).get("code"))
    return None


async def connection(
    address: tuple[str, int], requests: list[bytes], offset: int, tally: Tally,
    stop: asyncio.Event, check_every: int,
) -> None:
    """One keep-alive client: send, read the whole answer, repeat until ``stop``."""
    reader, writer = await asyncio.open_connection(*address)
    index = offset
    try:
        while not stop.is_set():
            request = requests[index % len(requests)]
            index += 1
            start = time.perf_counter()
            writer.write(request)
            try:
                status, body = await _read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
                tally.error(type(exc).__name__)
                writer.close()
                reader, writer = await asyncio.open_connection(*address)
                continue
            elapsed = time.perf_counter() - start
            # Decoding every answer would cost the client more than the call costs the server;
            # the status is always checked, the body of every check_every-th answer.
            why = f"http {status}" if status != 200 else None
            if why is None and index % check_every == 0:
                why = _failure(status, body)
                tally.checked += tally.recording
            if why is not None:
                tally.error(why)
            elif tally.recording:
                tally.latencies.append(elapsed)
    finally:
        writer.close()


@dataclass(frozen=True)
class Result:
    calls: int
    seconds: float
    latencies: list[float]
    errors: dict[str, int]
    checked: int
    client_cpu: float  # share of one core the load generator used
    server_cpu: float  # share of one core the server processes used (2.0 = two cores)


async def load(
    address: tuple[str, int], requests: list[bytes], concurrency: int, warmup: float,
    duration: float, check_every: int, server_pids: list[int],
) -> Result:
    tally = Tally()
    stop = asyncio.Event()
    step = max(1, len(requests) // concurrency)
    tasks = [
        asyncio.create_task(
            connection(address, requests, i * step, tally, stop, check_every)
        )
        for i in range(concurrency)
    ]
    await asyncio.sleep(warmup)
    tally.recording = True
    wall0, cpu0, server0 = time.perf_counter(), time.process_time(), _cpu_seconds(server_pids)
    await asyncio.sleep(duration)
    tally.recording = False
    wall = time.perf_counter() - wall0
    cpu, server = time.process_time() - cpu0, _cpu_seconds(server_pids) - server0
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return Result(
        calls=len(tally.latencies), seconds=wall, latencies=tally.latencies,
        errors=tally.errors, checked=tally.checked, client_cpu=cpu / wall,
        server_cpu=server / wall,
    )


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (from /proc; 0 where it is missing)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


# --------------------------------------------------------------------------------- server


@contextmanager
def running(address: str) -> Iterator[tuple[tuple[str, int], list[int]]]:
    """A server someone else started (``--address``): no pids, so no server CPU figure."""
    host, _, port = address.rpartition(":")
    yield (host, int(port)), []


@contextmanager
def served(
    bundle: Path, src: str | None, serve_args: list[str], log: Path, extra_path: list[str]
) -> Iterator[tuple[tuple[str, int], list[int]]]:
    """``bundle-mcp serve BUNDLE --http 127.0.0.1:0`` until ready: its address and pids."""
    env = dict(os.environ)
    env.pop("BUNDLE_MCP_TOKEN", None)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), *extra_path])
    command = [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle),
               "--http", "127.0.0.1:0", *serve_args]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        address = _wait_ready(process, log)
        yield address, [process.pid, *_children(process.pid)]
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], log: Path) -> tuple[str, int]:
    deadline = time.monotonic() + READY_SECONDS
    address: tuple[str, int] | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}):\n{log.read_text()}")
        if address is None and (match := _URL_LINE.search(log.read_bytes())):
            host, _, port = match.group(1).decode().rpartition(":")
            address = (host, int(port))
        # With --workers each process answers its own /readyz, and each new connection may
        # reach another one: ready means many answers in a row said so.
        if address is not None and all(_status(address, "/readyz") == 200 for _ in range(20)):
            return address
        time.sleep(0.1)
    raise SystemExit(f"the server was not ready within {READY_SECONDS:g} s:\n{log.read_text()}")


def _status(address: tuple[str, int], path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the worker processes of ``--workers``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


# ----------------------------------------------------------------------------------- main


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def report(label: str, result: Result) -> dict[str, Any]:
    enough = len(result.latencies) > 1
    cuts = statistics.quantiles(result.latencies, n=100) if enough else [0.0] * 99
    row = {
        "run": label,
        "calls/s": round(result.calls / result.seconds, 1),
        "p50 ms": _ms(cuts[49]),
        "p90 ms": _ms(cuts[89]),
        "p99 ms": _ms(cuts[98]),
        "max ms": _ms(max(result.latencies, default=0.0)),
        "errors": sum(result.errors.values()),
        "bodies checked": result.checked,
        "client cpu": f"{result.client_cpu:.0%}",
        "server cpu": f"{result.server_cpu:.0%}",
    }
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--tool", default="read_concept")
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--ids", type=int, default=500, help="distinct concepts to cycle through")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--check-every", type=int, default=10,
                        help="decode and check every Nth answer body (the status always)")
    parser.add_argument("--src", action="append", metavar="DIR",
                        help="PYTHONPATH of a server to measure (repeatable: one run each; "
                             "default: the current environment)")
    parser.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for serve, e.g. --serve-arg=--workers=2")
    parser.add_argument("--with-path", action="append", default=[], metavar="DIR",
                        help="with --src: also on the server's PYTHONPATH (say, a folder "
                             "holding httptools and uvloop, which uvicorn then uses)")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="load a server that is already running instead (to profile it)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the --src list this often")
    parser.add_argument("--logs", type=Path, help="keep the servers' stderr in this folder")
    parser.add_argument("--json", type=Path, help="also write the rows and errors here")
    args = parser.parse_args()

    bundle = args.bundle.resolve()
    arguments = tool_arguments(args.tool, concept_ids(bundle, args.ids, args.seed))
    rows = []
    with tempfile.TemporaryDirectory(prefix="http-load-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for round_number in range(args.rounds):
            for n, src in enumerate(args.src or [None]):
                label = f"{src or 'env'}" + (f" #{round_number + 1}" if args.rounds > 1 else "")
                log = logs / f"serve-{round_number}-{n}.log"
                server = (running(args.address) if args.address
                          else served(bundle, src, args.serve_arg, log, args.with_path))
                with server as (address, pids):
                    # The Host header must name the bound address (DNS-rebinding protection).
                    requests = encode_requests(f"{address[0]}:{address[1]}", args.tool, arguments)
                    result = asyncio.run(load(address, requests, args.concurrency, args.warmup,
                                              args.duration, args.check_every, pids))
                row = report(label, result)
                row["error kinds"] = result.errors
                rows.append(row)
                print(f"{args.tool} x{args.concurrency} {args.duration:g}s  " + "  ".join(
                    f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any(row["errors"] for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
