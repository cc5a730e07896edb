"""The HTTP bearer token is compared as bytes, so a token outside ASCII matches too.

Starlette decodes header values as Latin-1; comparing that text's UTF-8 with the token's UTF-8
never matched a non-ASCII token. The middleware now compares the raw header bytes.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from bundle_mcp.server import BearerTokenMiddleware

TOKEN = "tök€n-ü"  # deliberately not ASCII
TOKEN_UTF8 = TOKEN.encode("utf-8")


async def _status(raw_headers: list[tuple[bytes, bytes]], token: str) -> int:
    """Run one HTTP request through the middleware in front of an app that answers 200."""
    sent: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": raw_headers}
    await BearerTokenMiddleware(app, token)(scope, receive, send)
    return int(sent[0]["status"])


def status(raw_headers: list[tuple[bytes, bytes]], token: str = TOKEN) -> int:
    return anyio.run(_status, raw_headers, token)


def test_the_utf8_bytes_of_a_non_ascii_token_match() -> None:
    assert status([(b"authorization", b"Bearer " + TOKEN_UTF8)]) == 200
    assert status([(b"authorization", b"bearer  " + TOKEN_UTF8 + b" ")]) == 200


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"authorization", b"Bearer " + TOKEN.encode("utf-8")[:-1])],
        [(b"authorization", b"Bearer " + TOKEN_UTF8 + b"x")],
        [(b"authorization", b"Basic " + TOKEN_UTF8)],
        # The same text in another encoding is other bytes.
        [(b"authorization", b"Bearer " + TOKEN.encode("cp1252"))],
        # Two Authorization headers: which one counts is ambiguous, so neither does.
        [(b"authorization", b"Bearer " + TOKEN_UTF8), (b"authorization", b"Bearer x")],
    ],
)
def test_anything_else_is_unauthorized(headers: list[tuple[bytes, bytes]]) -> None:
    assert status(headers) == 401


def test_only_the_utf8_form_of_a_latin1_token_matches() -> None:
    # The old comparison matched exactly the Latin-1 bytes (Starlette's reading of a header).
    token = "tökén"
    assert status([(b"authorization", b"Bearer " + token.encode("utf-8"))], token=token) == 200
    assert status([(b"authorization", b"Bearer " + token.encode("latin-1"))], token=token) == 401


def test_an_ascii_token_still_matches() -> None:
    assert status([(b"authorization", b"Bearer abc-123")], token="abc-123") == 200
    assert status([(b"Authorization", b"Bearer abc-124")], token="abc-123") == 401


# --------------------------------------------------------------------------------------------
# A real `bundle-mcp serve --http --token <non-ASCII>` and a request carrying the UTF-8 bytes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    base = Path(os.path.realpath(tmp_path_factory.mktemp("token")))
    bundle = base / "bundle"
    bundle.mkdir()
    (bundle / "roast.md").write_text("---\ntype: process\n---\n# Roast\n", encoding="utf-8")
    port = _free_port()
    log = base / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle)]
            + ["--http", f"127.0.0.1:{port}", "--token", TOKEN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"serve --http exited:\n{log.read_text(encoding='utf-8')}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("serve --http did not start listening")
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _post(port: int, authorization: bytes) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("POST", "/mcp")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Accept", "application/json, text/event-stream")
        connection.putheader("MCP-Protocol-Version", "2025-11-25")
        connection.putheader("Authorization", authorization)  # bytes go out as they are
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        return connection.getresponse().status
    finally:
        connection.close()


def test_http_accepts_the_utf8_token(server: int) -> None:
    assert _post(server, b"Bearer " + TOKEN_UTF8) == 200
    assert _post(server, b"Bearer " + TOKEN.encode("utf-8")[:-1]) == 401
