"""An HTTP client that idles on its keep-alive connection is still served on it (issue 25, item 4).

The TypeScript SDK compiles every advertised ``outputSchema`` between ``tools/list`` and its first
``tools/call``, blocking its event loop (seconds on a busy laptop). uvicorn's default closes a
connection idle for 5 s; the SDK then wrote ``tools/call`` on the socket the server had closed
and the call failed (``fetch failed … other side closed``). ``serve --http`` now keeps an idle
connection open for ``--keep-alive`` seconds (75 by default), in one process and with
``--workers``; a client that idles 8 s between two requests on one connection must be answered
on that same socket.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

try:
    from tests.served import printed_url, start_serve, stop
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url, start_serve, stop  # type: ignore[no-redef,import-not-found]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
WAIT_SECONDS = 60
IDLE_SECONDS = 8  # longer than uvicorn's default keep-alive (5 s), shorter than ours (75 s)
SHORT_KEEP_ALIVE = "1"


def _start(log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_serve(log, EXAMPLE, "--http", "127.0.0.1:0", *extra,
                       BUNDLE_MCP_CACHE_DIR=str(log.parent / "cache"))


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """``serve(*args)`` starts a server and gives its port; every server is stopped after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> int:
        log = tmp_path / f"serve-{len(started)}.log"
        process = _start(log, *args)
        started.append(process)
        url = printed_url(process, log, WAIT_SECONDS)
        return int(url.rsplit(":", 1)[1].split("/")[0])

    try:
        yield start
    finally:
        for process in started:
            stop(process)


def _rpc(connection: http.client.HTTPConnection, port: int, number: int, method: str,
         params: dict[str, object]) -> dict[str, object]:
    body = json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
    connection.request("POST", "/mcp", body, {
        "Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
    })
    response = connection.getresponse()
    text = response.read()
    assert response.status == 200, text
    assert (response.getheader("connection") or "").lower() != "close"
    reply: dict[str, object] = json.loads(text)
    assert "error" not in reply, reply
    return reply


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other side has closed this connection (end of file waiting to be read)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def _list_then_idle(port: int, idle: float) -> tuple[http.client.HTTPConnection, socket.socket]:
    """One connection: initialize and tools/list on it, then ``idle`` seconds of silence."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
    _rpc(connection, port, 1, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "keep-alive-test", "version": "1"},
    })
    sock = connection.sock
    assert sock is not None
    # Never reconnect behind the test's back: a request on a closed connection must fail.
    connection.auto_open = 0
    listed = _rpc(connection, port, 2, "tools/list", {})
    assert connection.sock is sock
    assert listed["result"]["tools"]  # type: ignore[index]
    time.sleep(idle)  # the idle time is what the test is about: nothing to wait for instead
    return connection, sock


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_client_idle_for_8_s_is_served_on_the_same_connection(
    serve: Callable[..., int], workers: str
) -> None:
    port = serve("--workers", workers)
    connection, sock = _list_then_idle(port, IDLE_SECONDS)
    try:
        assert not _closed_by_peer(sock), (
            f"the server closed a connection idle for {IDLE_SECONDS} s (keep-alive too short)"
        )
        reply = _rpc(connection, port, 3, "tools/call",
                     {"name": "list_concepts", "arguments": {}})
        assert connection.sock is sock  # answered on the socket it was sent on
        result = reply["result"]
        assert isinstance(result, dict) and result.get("isError") is not True, result
        assert result["structuredContent"]["concepts"]
    finally:
        connection.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_keep_alive_sets_how_long_an_idle_connection_stays_open(
    serve: Callable[..., int], workers: str
) -> None:
    """``--keep-alive 1`` reaches uvicorn in both process modes: the idle connection closes."""
    port = serve("--workers", workers, "--keep-alive", SHORT_KEEP_ALIVE)
    connection, sock = _list_then_idle(port, 0)
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not _closed_by_peer(sock):
            assert time.monotonic() < deadline, "the idle connection was never closed"
            time.sleep(0.1)
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "127.0.0.1:0", "--keep-alive", "0"], "--keep-alive wants a number of seconds"),
        (["--http", "127.0.0.1:0", "--keep-alive", "-3"], "--keep-alive wants a number of seconds"),
        (["--http", "127.0.0.1:0", "--keep-alive", "2.5"], "invalid int value"),
        (["--keep-alive", "75"], "--keep-alive applies to --http only"),
    ],
)
def test_a_bad_keep_alive_is_one_clear_line_and_exit_2(args: list[str], message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE, *args],
        capture_output=True, text=True, timeout=WAIT_SECONDS, env=env, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
