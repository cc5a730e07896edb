"""``serve --http ... --workers 2``: two processes answer on one port, and none outlives the
server, whether it is stopped, a worker dies, or the supervisor itself is killed."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    from tests.served import printed_url, start_serve
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url, start_serve  # type: ignore[no-redef,import-not-found]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to see which process answered"
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
WAIT_SECONDS = 60
CONNECTIONS = 24  # all on one worker by chance: 2 × 2**-24


def _start(log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_serve(log, EXAMPLE, "--http", "127.0.0.1:0", "--workers", "2", *extra,
                       BUNDLE_MCP_CACHE_DIR=str(log.parent / "cache"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, list[int], Path]]:
    log = tmp_path / "serve.log"
    process = _start(log)
    try:
        port = int(printed_url(process, log, WAIT_SECONDS).rsplit(":", 1)[1].split("/")[0])
        match = re.search(r"2 workers, pids (\d+), (\d+)", log.read_text())
        assert match, log.read_text()
        yield process, port, [int(pid) for pid in match.groups()], log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT_SECONDS)


def _call(connection: http.client.HTTPConnection, port: int, number: int) -> dict[str, object]:
    body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                       "params": {"name": "list_concepts", "arguments": {}}})
    connection.request("POST", "/mcp", body, {
        "Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
    })
    response = connection.getresponse()
    assert response.status == 200
    reply: dict[str, object] = json.loads(response.read())
    return reply


def _wait_ready(port: int) -> None:
    # Each worker answers its own /readyz; a new connection may reach either one.
    deadline = time.monotonic() + WAIT_SECONDS
    answers: list[int] = []
    while answers[-10:] != [200] * 10:
        assert time.monotonic() < deadline, answers[-10:]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/readyz")
        answers.append(connection.getresponse().status)
        connection.close()
        if answers[-1] != 200:
            time.sleep(0.05)


def _established(pid: int, port: int) -> int:
    """How many accepted connections on ``port`` process ``pid`` holds (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status  # a zombie has exited: only its parent has to collect it


def _wait_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not all(_gone(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if not _gone(pid)]
        time.sleep(0.05)


def test_both_workers_answer_on_one_port_and_sigterm_stops_them_all(
    served: tuple[subprocess.Popen[bytes], int, list[int], Path],
) -> None:
    process, port, pids, _log = served
    assert len(set(pids)) == 2 and process.pid not in pids
    _wait_ready(port)
    connections = [
        http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(CONNECTIONS)
    ]
    try:
        for number, connection in enumerate(connections, 1):
            reply = _call(connection, port, number)
            result = reply["result"]
            assert isinstance(result, dict) and result.get("isError") is False, reply
        held = {pid: _established(pid, port) for pid in pids}
        assert sum(held.values()) == CONNECTIONS, held
        assert all(count > 0 for count in held.values()), held  # both processes answered
    finally:
        for connection in connections:
            connection.close()
    process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT_SECONDS) == 0
    _wait_gone(pids)


def test_a_worker_that_dies_stops_the_server_with_status_1(
    served: tuple[subprocess.Popen[bytes], int, list[int], Path],
) -> None:
    process, _port, pids, log = served
    os.kill(pids[0], signal.SIGKILL)
    assert process.wait(WAIT_SECONDS) == 1
    _wait_gone(pids)
    assert f"worker {pids[0]} exited (signal SIGKILL)" in log.read_text()


def test_workers_exit_when_the_supervisor_is_killed(
    served: tuple[subprocess.Popen[bytes], int, list[int], Path],
) -> None:
    process, _port, pids, _log = served
    process.kill()
    process.wait(WAIT_SECONDS)
    _wait_gone(pids)


def test_workers_want_http(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE, "--workers", "2"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT_SECONDS,
    )
    assert result.returncode == 2
    assert b"--workers applies to --http only" in result.stderr


@pytest.mark.parametrize("reuse_port", [False, True], ids=["plain", "another-workers-server"])
def test_a_taken_port_is_one_line_and_exit_2(reuse_port: bool) -> None:
    # SO_REUSEPORT would let a second --workers server join the first one's port: refused too.
    with socket.create_server(("127.0.0.1", 0), reuse_port=reuse_port) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE,
             "--http", f"127.0.0.1:{port}", "--workers", "2"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT_SECONDS,
        )
    assert result.returncode == 2
    assert result.stderr.decode().strip().endswith("cannot listen there (Address already in use)")


def _status_with(port: int, token: str) -> int:
    """A new connection (so either worker may take it) asking tools/list with ``token``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/mcp", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), {
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
        })
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_sighup_reaches_every_worker(tmp_path: Path) -> None:
    """The supervisor forwards SIGHUP: each worker re-reads the readers file itself."""
    from bundle_mcp.readers import hash_token

    readers = tmp_path / "readers.toml"
    entry = '[[readers]]\nname = "beans"\ntokens = [{tokens}]\nread = ["beans"]\n'
    readers.write_text(entry.format(tokens=f'"{hash_token("old-token")}"'), "utf-8")
    log = tmp_path / "serve.log"
    process = _start(log, "--readers", str(readers))
    try:
        port = int(printed_url(process, log, WAIT_SECONDS).rsplit(":", 1)[1].split("/")[0])
        assert _status_with(port, "new-token") == 401
        readers.write_text(entry.format(
            tokens=f'"{hash_token("old-token")}", "{hash_token("new-token")}"'), "utf-8")
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT_SECONDS
        answers: list[int] = []
        while answers[-CONNECTIONS:] != [200] * CONNECTIONS:  # both workers, by chance
            assert time.monotonic() < deadline, (answers[-CONNECTIONS:], log.read_text())
            answers.append(_status_with(port, "new-token"))
        assert process.poll() is None  # a worker did not take SIGHUP as a stop
        # Each worker reloaded (both answer the new token above); a worker whose handler came
        # after the file changed also catches up on its own, so it may say so twice.
        assert log.read_text().count("readers reloaded from") >= 2
    finally:
        process.kill()
        process.wait(WAIT_SECONDS)
