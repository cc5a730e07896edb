"""The stdio transport answers every request line, however hostile, and keeps serving.

The SDK's transport dropped lines it could not parse without a reply, so the client waited until
its own timeout. Most tests here drive a real ``bundle-mcp serve`` process with raw lines: each
hostile line must get the JSON-RPC error the spec names (with the request's id when it can be
read), and the next ``ping`` must still be answered. Every read is bounded.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp.types as types
import pytest
from mcp.server import Server, ServerRequestContext

from bundle_mcp.server import build_server
from bundle_mcp.stdio import encode_message, read_line
from stdio_pipes import in_process

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import FakeTools

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
REPLY_TIMEOUT = 10.0
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def _server_command() -> list[str]:
    script = Path(sys.executable).with_name("bundle-mcp")
    if script.exists():
        return [str(script), "serve", EXAMPLE]
    return [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE]


class RawStdio:
    """A JSON-RPC peer that writes raw bytes and reads reply lines with a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin: IO[bytes] = process.stdin
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 1000
        threading.Thread(target=self._pump, args=(process.stdout,), daemon=True).start()

    def _pump(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self._lines.put(line)

    def send(self, line: bytes) -> None:
        self._stdin.write(line + b"\n")
        self._stdin.flush()

    def send_json(self, message: dict[str, Any]) -> None:
        self.send(json.dumps(message).encode("utf-8"))

    def reply(self, timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no reply within {timeout} s (server exit code {self.process.poll()})")
        # Strict UTF-8: a reply the client cannot decode is as bad as no reply.
        message = json.loads(line.decode("utf-8"))
        assert isinstance(message, dict)
        return message

    def fresh_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def ping(self) -> None:
        """The session still answers, and nothing else was queued before this answer."""
        request_id = self.fresh_id()
        self.send_json({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        assert self.reply() == {"jsonrpc": "2.0", "id": request_id, "result": {}}

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request_id = self.fresh_id()
        self.send_json(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        reply = self.reply()
        assert reply["id"] == request_id
        result = reply["result"]
        assert isinstance(result, dict)
        return result


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    log = tmp_path_factory.mktemp("stdio") / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            _server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
    peer = RawStdio(process)
    try:
        peer.send_json(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            }
        )
        assert peer.reply(timeout=60)["id"] == 0
        peer.send_json({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield peer
    finally:
        process.kill()
        process.wait(10)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        process.stdout.close()


def tools_call(request_id: int, arguments: str) -> bytes:
    """A tools/call line with ``arguments`` spliced in as raw JSON text."""
    head = f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
    return (head + f'"params":{{"name":"search_sections","arguments":{arguments}}}}}').encode()


DEEP = 200
HOSTILE: dict[str, tuple[bytes, int, int | str | None]] = {
    # name: (line, expected error code, expected id)
    "lone surrogate in arguments": (tools_call(1, '{"query":"\\ud800"}'), INVALID_PARAMS, 1),
    "lone low surrogate in a key": (tools_call(2, '{"\\udc00":1}'), INVALID_PARAMS, 2),
    "invalid UTF-8 inside a string": (tools_call(3, '{"query":"caf?"}').replace(b"?", b"\xe9"),
                                      INVALID_PARAMS, 3),
    "integer over the digit limit": (tools_call(4, '{"query":"x","limit":' + "9" * 5000 + "}"),
                                     INVALID_PARAMS, 4),
    "float overflowing to infinity": (tools_call(5, '{"query":"x","limit":1e400}'),
                                      INVALID_PARAMS, 5),
    "malformed JSON": (b'{"jsonrpc":"2.0","id":6,', PARSE_ERROR, None),
    "not JSON at all": (b"hello", PARSE_ERROR, None),
    "NaN is not JSON": (tools_call(7, '{"query":"x","limit":NaN}'), PARSE_ERROR, None),
    "invalid UTF-8 outside strings": (b'{"jsonrpc":"2.0","id":8,\xff"method":"ping"}',
                                      PARSE_ERROR, None),
    "nesting beyond the parser": (tools_call(9, '{"query":' + "[" * 5000 + "]" * 5000 + "}"),
                                  PARSE_ERROR, None),
    "a batch": (b'[{"jsonrpc":"2.0","id":10,"method":"ping"}]', INVALID_REQUEST, None),
    "no method": (b'{"jsonrpc":"2.0","id":11}', INVALID_REQUEST, 11),
    "wrong jsonrpc version": (b'{"jsonrpc":"1.0","id":12,"method":"ping"}', INVALID_REQUEST, 12),
    "params not an object": (b'{"jsonrpc":"2.0","id":"p","method":"ping","params":[1]}',
                             INVALID_REQUEST, "p"),
    "lone surrogate in the method": (b'{"jsonrpc":"2.0","id":13,"method":"pi\\ud800ng"}',
                                     INVALID_REQUEST, 13),
    "lone surrogate in the id": (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
                                 INVALID_REQUEST, None),
    "id over the digit limit": (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
                                INVALID_REQUEST, None),
    "fractional id": (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST, None),
    "null id": (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST, None),
    "boolean id": (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST, None),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_line_gets_its_error_and_the_session_goes_on(stdio: RawStdio, name: str) -> None:
    line, code, request_id = HOSTILE[name]
    stdio.send(line)
    reply = stdio.reply()
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == request_id, reply
    assert reply["error"]["code"] == code, reply
    assert "result" not in reply
    stdio.ping()


@pytest.mark.parametrize("depth", [DEEP, 900])
def test_deep_arguments_get_an_answer(stdio: RawStdio, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    for arguments in (f'{{"query":{nested}}}', f'{{"q":{nested}}}'):
        stdio.send(tools_call(40 + depth, arguments))
        reply = stdio.reply()
        assert reply["id"] == 40 + depth
        # The contract check refuses it as a tool error (an envelope), not silence.
        assert reply["result"]["isError"] is True
        assert reply["result"]["structuredContent"]["code"] == "invalid_request"
    stdio.ping()


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\\ud800"}}',
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1e400}}',
        b'{"jsonrpc":"2.0","id":"r\\ud800","result":{}}',  # a response: never answered
        b'{"jsonrpc":"2.0","id":77,"result":[]}',
        b"",
        b"  \t ",
    ],
)
def test_notifications_responses_and_blank_lines_get_no_reply(
    stdio: RawStdio, line: bytes
) -> None:
    stdio.send(line)
    # The transport handles lines in order and writes its own errors before reading on, so a
    # stray reply to this line would arrive before the ping's answer and fail ping().
    stdio.ping()


def test_tools_still_work_after_the_hostile_lines(stdio: RawStdio) -> None:
    for line, _, _ in HOSTILE.values():
        stdio.send(line)
        stdio.reply()
    result = stdio.call_tool("search_sections", {"query": "roast", "limit": 1})
    assert result["isError"] is False
    assert result["structuredContent"]["hits"]
    # A surrogate pair is one character, not a lone surrogate: accepted.
    result = stdio.call_tool("search_sections", {"query": "\U0001f600 roast", "limit": 1})
    assert result["structuredContent"]["terms"] == ["roast"]


# --------------------------------------------------------------------------------------------
# In process: the writer never dies, and the reader never waits for tool workers


def test_an_unencodable_reply_becomes_an_internal_error_for_its_id() -> None:
    bad = types.JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "a\ud800b"})
    line = encode_message(bad)
    assert line is not None and line.endswith(b"\n")
    reply = json.loads(line.decode("utf-8"))
    assert reply["id"] == 5 and reply["error"]["code"] == types.INTERNAL_ERROR
    notification = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"data": "\udc80"}
    )
    assert encode_message(notification) is None


def test_read_line_verdicts() -> None:
    assert read_line(b"\r\n").message is None and read_line(b"\r\n").reply is None
    good = read_line(b'{"jsonrpc":"2.0","id":"a","method":"ping"}\r\n')
    assert isinstance(good.message, types.JSONRPCRequest) and good.reply is None
    notification = read_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(notification.message, types.JSONRPCNotification)
    bad = read_line(b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":"\\udfff"}}')
    assert bad.reply is not None and bad.reply.id == 3
    assert bad.reply.error.code == INVALID_PARAMS


@pytest.mark.anyio
async def test_in_process_transport_survives_an_unencodable_tool_result() -> None:
    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="x\ud800")])

    server: Server[Any] = Server("t", on_call_tool=on_call_tool)
    with anyio.fail_after(30):
        async with in_process(server) as pipes:
            pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "any", "arguments": {}}})
            reply = await pipes.receive()
            assert reply["id"] == 2
            assert reply["error"]["code"] == types.INTERNAL_ERROR
            pipes.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
            assert await pipes.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.anyio
async def test_a_ping_is_read_while_every_worker_thread_is_busy(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    workers = int(anyio.to_thread.current_default_thread_limiter().total_tokens)  # 40
    busy = workers + 5  # more calls than anyio has default worker threads
    server = build_server(fake_tools.dispatcher(bundles=(simple_bundle,)))
    with anyio.fail_after(60):
        async with in_process(server) as pipes:
            for n in range(busy):
                pipes.send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                            "params": {"name": "slow", "arguments": {"seconds": 4}}})
            # Wait until the calls hold every default worker; on a thread of its own, since a
            # default worker is just what this wait cannot get.
            assert await anyio.to_thread.run_sync(
                fake_tools.wait_for_slow_calls, workers, 10,
                limiter=anyio.CapacityLimiter(1),
            )
            pipes.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
            with anyio.fail_after(2):  # well before the first slow call can finish
                assert await pipes.receive() == {"jsonrpc": "2.0", "id": "ping", "result": {}}
            replies = [await pipes.receive() for _ in range(busy)]
            assert sorted(r["id"] for r in replies) == list(range(busy))
