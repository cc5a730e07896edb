"""A server on the stdio transport over two OS pipes, in the test's event loop, and the client's
side of them (tests/test_stdio_transport.py, tests/test_answer_lines.py); the lines a client
writes (tests/test_first_answer.py, tests/test_first_call.py)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import IO, Any

import anyio
import anyio.to_thread
from mcp.server import Server

from bundle_mcp.answer_lines import AnswerLines
from bundle_mcp.stdio import stdio_transport


def line_of(message: Any) -> bytes:
    """``message`` as one line of the wire (JSON, then a newline)."""
    return json.dumps(message).encode() + b"\n"


def initialize(version: Any = "2025-11-25", request_id: Any = 0, **params: Any
               ) -> dict[str, Any]:
    """An ``initialize`` request; ``params`` added to (or replacing) the usual ones."""
    body = {"protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}
    body.update(params)
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": body}


class Pipes:
    """The client's side of an in-process transport: JSON lines out, JSON lines in."""

    def __init__(self, client_out: IO[bytes], client_in: IO[bytes]) -> None:
        self._out = client_out
        self._in = client_in
        self._limiter = anyio.CapacityLimiter(1)  # the client must not wait for tool workers

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message).encode() + b"\n")
        self._out.flush()

    async def line(self) -> bytes:
        """The server's next line, as written."""
        return await anyio.to_thread.run_sync(
            self._in.readline, abandon_on_cancel=True, limiter=self._limiter
        )

    async def receive(self) -> dict[str, Any]:
        reply = json.loads((await self.line()).decode("utf-8"))
        assert isinstance(reply, dict)
        return reply

    async def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
        assert (await self.receive())["id"] == "init"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        self._out.close()  # EOF: the session ends and the transport drains


@asynccontextmanager
async def in_process(
    server: Server[Any], answer_lines: AnswerLines | None = None,
    answering: Callable[[], AbstractContextManager[object]] = nullcontext,
    sink: Callable[[IO[bytes]], IO[bytes]] = lambda wire: wire,
) -> AsyncIterator[Pipes]:
    """``server`` on stdio_transport over two OS pipes, run in this event loop, initialized;
    ``answer_lines`` and ``answering``: as ``serve_stdio`` hands them over; ``sink``: what the
    transport writes to, given the pipe (a wrapper that watches the writes)."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    with (
        os.fdopen(in_read, "rb") as wire_in,
        os.fdopen(in_write, "wb") as client_out,
        os.fdopen(out_read, "rb") as client_in,
        os.fdopen(out_write, "wb") as wire_out,
    ):
        pipes = Pipes(client_out, client_in)
        async with stdio_transport(wire_in, sink(wire_out), answer_lines=answer_lines,
                                   answering=answering) as (read_stream, write_stream):
            async with anyio.create_task_group() as tg:
                options = server.create_initialization_options()
                tg.start_soon(server.run, read_stream, write_stream, options)
                await pipes.initialize()
                try:
                    yield pipes
                finally:
                    pipes.close()
